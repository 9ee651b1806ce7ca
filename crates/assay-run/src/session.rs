//! One whole run, as `assay run` and `assay serve` both do it: import the knowledge base,
//! assemble the system under test (embedder, fresh embeddings, pipeline, reranker, all behind
//! one provider-call wrapper), run the banks with a journal, save the results.

use std::collections::HashMap;

use assay_core::bank::BankType;
use assay_core::runlog::RunLog;
use assay_kb::KnowledgeBase;
use assay_providers::{AccountingSnapshot, RerankerSpec};
use assay_retrieval::pipeline::Pipeline;

use crate::HarnessError;
use crate::calibrate::{CalibrationOutcome, CalibrationRequest, Scope};
use crate::caselog;
use crate::freshness;
use crate::journal::Journal;
use crate::run::{self, Backends, RunObserver, RunOptions, RunRequest};
use crate::runners::SemanticRetriever;
use assay_project::engine::{self, OpenStore, ProviderCalls, SearchChoice, SemanticSearch};
use assay_project::project::Project;
use assay_project::results::{self, SavedResults};

/// How to journal a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JournalMode {
    /// No journal.
    #[default]
    Off,
    /// A new journal (replacing the one of an interrupted run, with a warning).
    Start,
    /// Continue the interrupted run of the same request and setup.
    Resume,
}

/// The choices of a run beyond its [`RunRequest`]: each `None` falls back to the environment,
/// then `assay.toml`, then the default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunSetup {
    /// The embedder (`--embedder`).
    pub embedder: Option<String>,
    /// The reranker (`--reranker`).
    pub reranker: Option<String>,
    /// The cache mode (`--cache`).
    pub cache: Option<String>,
    /// Semantic cases in flight (`--concurrency`).
    pub concurrency: Option<usize>,
    /// The journal.
    pub journal: JournalMode,
    /// Save `results/results_<stamp>.json` and `results/report_<stamp>.md` / `.html`.
    pub save: bool,
    /// Times each semantic case runs (`--repeat`, 1 by default): only with a stochastic stage
    /// (an LLM reranker); the repeats' scores, their spread and the cases whose verdict changed
    /// go into the RunLog.
    pub repeat: u32,
    /// A baseline to compare the run with ([`crate::baseline::load`]): the comparison and the
    /// regression rules' verdict go into the RunLog (`baseline`) and every report.
    pub baseline: Option<crate::baseline::Baseline>,
    /// How to build the answer bank's product (`None`: the answer bank is skipped with a
    /// warning, or refused when asked for by name).
    pub answer: Option<crate::answer::AnswerFactory>,
}

/// What a run produced.
#[derive(Debug)]
pub struct RunOutcome {
    /// The RunLog.
    pub log: RunLog,
    /// The RunLog as JSON (what was saved).
    pub json: String,
    /// Where it was saved.
    pub saved: Option<SavedResults>,
    /// Provider calls, tokens, cost and latency.
    pub usage: AccountingSnapshot,
    /// The same as text (empty when no provider was called).
    pub usage_report: String,
}

/// This process's command line, for the run lock's holder description.
fn command_line() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

/// Whether the request may run semantic cases (so the embedder is needed).
pub fn wants_semantic(project: &Project, request: &RunRequest) -> bool {
    let bank_selected = request.banks.is_empty()
        || request.banks.contains(&BankType::Semantic)
        || request.topic.is_some();
    bank_selected && any_selected(&project.banks.semantic, request)
}

/// Whether the request may run answer cases (so the product and the judge are needed).
pub fn wants_answer(project: &Project, request: &RunRequest) -> bool {
    let bank_selected = (request.banks.is_empty() || request.banks.contains(&BankType::Answer))
        && request.topic.is_none();
    bank_selected && any_selected(&project.banks.answer, request)
}

/// Whether some case of a held bank passes the request's `--test` and `--changed-since`.
fn any_selected<C: assay_core::bank::Case>(
    cases: &[assay_project::banks::Located<C>],
    request: &RunRequest,
) -> bool {
    let case_selected =
        request.tests.is_empty() || cases.iter().any(|c| request.wants(c.case.test_id()));
    let changed_selected = request
        .changed
        .as_ref()
        .is_none_or(|ch| cases.iter().any(|c| ch.selects(&c.case)));
    !cases.is_empty() && case_selected && changed_selected
}

/// Runs `request` on `project` as `setup` says.
///
/// The future is not `Send` (the SQLite store is used across awaits): run it on a
/// current-thread runtime, e.g. inside `spawn_blocking`.
pub async fn execute(
    project: &Project,
    request: &RunRequest,
    setup: &RunSetup,
    env: &dyn Fn(&str) -> Option<String>,
    observer: &mut dyn RunObserver,
) -> Result<RunOutcome, HarnessError> {
    if setup.concurrency == Some(0) {
        return Err(HarnessError::Usage(
            "--concurrency: must be at least 1".into(),
        ));
    }
    let settings = &project.settings;
    // The knowledge base the banks read is the store: refreshed from the kb/ files when they
    // are the source of truth (the embedded store), read as it is when it is a database.
    let store = engine::open_store_with(settings, env)?;
    engine::sync_kb(&store, project)?;
    let kb = engine::snapshot(&*store)?;
    // The entities the banks and rules name, checked against the store: where the database
    // is the source of truth, an unknown one stops the run here (Project::load checked them
    // against the kb/ files where those are); and a case that expects an inactive entity is
    // named with the version that deactivated it.
    let ref_warnings = project.check_entity_refs(&kb, &*store)?;
    let wants_semantic = wants_semantic(project, request);
    let wants_answer = wants_answer(project, request) && setup.answer.is_some();
    // The call cache is for remote providers: a run with an in-process embedder and no reranker
    // does not open it (the answer bank's judge is a model: it does).
    let remote = wants_answer
        || wants_semantic
            && (engine::choose_reranker(settings, setup.reranker.as_deref(), env)?.0
                != RerankerSpec::None
                || !engine::choose_embedder(settings, setup.embedder.as_deref(), env)?
                    .is_in_process());
    let calls = ProviderCalls::open(settings, setup.cache.as_deref(), env, remote)?;
    observer.rate_limits(calls.limits());

    let semantic = if wants_semantic {
        let reranker = match engine::build_reranker(settings, setup.reranker.as_deref(), env)? {
            Some(r) => Some((calls.reranker(r), engine::rerank_documents(&kb)?)),
            None => None,
        };
        let prompts = selected_prompts(project, request);
        let parts = semantic_parts(
            project,
            &store,
            &kb,
            setup.embedder.as_deref(),
            &calls,
            env,
            &prompts,
        )
        .await?;
        Some((parts, reranker))
    } else {
        None
    };
    let selection = engine::Selection::parse(&settings.semantic.selection).unwrap_or_default();
    let mut search = semantic
        .as_ref()
        .map(|(parts, reranker)| {
            SemanticSearch::new(
                &parts.pipeline,
                &parts.queries,
                parts.candidates,
                settings.semantic.top_k,
                &parts.model,
                reranker.clone(),
            )
            .with_threshold(parts.threshold)
            .with_search(parts.search.clone())
            .with_kb(&kb)
            .with_selection(selection)
        })
        .transpose()?;
    if settings.semantic.warm_up
        && let Some(search) = search.as_mut()
    {
        search.warm_up(
            project
                .banks
                .semantic
                .iter()
                .filter(|c| run::in_shard(request, BankType::Semantic, &c.case.test_id, true))
                .filter(|c| {
                    request
                        .changed
                        .as_ref()
                        .is_none_or(|ch| ch.selects(&c.case))
                })
                .map(|c| (c.case.prompt.as_str(), &c.case.user_state)),
        )?;
    }
    let answer = match (&setup.answer, wants_answer) {
        (Some(factory), true) => Some(
            crate::answer::AnswerBackend::build(
                project,
                &store,
                &kb,
                setup.embedder.as_deref(),
                &calls,
                env,
                factory,
            )
            .await?,
        ),
        _ => None,
    };
    let backends = Backends {
        kb: &kb,
        semantic: search.as_ref().map(|s| s as &dyn SemanticRetriever),
        answer: answer.as_ref(),
    };
    if setup.repeat > 1 {
        if !search
            .as_ref()
            .is_some_and(SemanticRetriever::is_stochastic)
        {
            return Err(HarnessError::Usage(
                "--repeat: this run has no stochastic stage (an LLM reranker, `--reranker anthropic/…` or `openai/…`): every repeat would score the same".into(),
            ));
        }
        if matches!(setup.journal, JournalMode::Resume) {
            return Err(HarnessError::Usage(
                "--repeat cannot resume an interrupted run: run it again (finished repeats come from the call cache)".into(),
            ));
        }
    }

    let journal_path = engine::journal_path(settings);
    // A repeated run is not journaled: its entries would not resume a plain run.
    let journal_mode = if setup.repeat > 1 {
        JournalMode::Off
    } else {
        setup.journal
    };
    // Runs that journal or save share `.assay/journal.jsonl` and the results folder: one at a
    // time per project, the second refused with the first named (never two writers of one
    // journal, never a live run's journal called interrupted).
    let _run_lock = if journal_mode == JournalMode::Off && !setup.save {
        None
    } else {
        Some(
            assay_project::lock::ProjectLock::acquire_run(&settings.root, &command_line())
                .map_err(HarnessError::from)?,
        )
    };
    // A journal whose run was saved already (a process killed between the save and the
    // journal's removal): that run is done. `--resume` answers with it; a new run leaves its
    // saved run log alone (the journal is unlinked, never truncated, in `Journal::start`).
    if journal_mode != JournalMode::Off
        && let Some(header) = crate::journal::read_header(&journal_path)
        && let Some((id, saved)) =
            crate::runs::find_saved(&settings.results_dir, &header.timestamp, &header.run_id)
    {
        if journal_mode == JournalMode::Resume {
            tracing::warn!(
                "--resume: run {} was saved already as results_{id}.json (the process stopped before it removed its journal): nothing to resume",
                header.run_id
            );
            crate::journal::discard(&journal_path)?;
            let json = assay_report::json(&saved);
            let paths = crate::runs::saved_paths(&settings.results_dir, &id, &saved);
            return Ok(RunOutcome {
                log: saved,
                json,
                saved: Some(paths),
                usage: calls.usage(),
                usage_report: String::new(),
            });
        }
        tracing::info!(
            "the journal of run {} is left over from its save (results_{id}.json); a new run starts",
            header.run_id
        );
        crate::journal::discard(&journal_path)?;
    }
    let mut journal = match journal_mode {
        JournalMode::Off => None,
        JournalMode::Start => {
            if journal_path.exists() {
                tracing::warn!(
                    "starting over: the journal of an interrupted run ({}) is replaced; `assay run --resume` continues such a run",
                    journal_path.display()
                );
            }
            let header = run::journal_header(project, request, backends)?;
            Some(Journal::start(&journal_path, header)?)
        }
        JournalMode::Resume => {
            let header = run::journal_header(project, request, backends)?;
            let journal = Journal::resume(&journal_path, &header)?;
            tracing::info!(
                run_id = journal.header().run_id,
                finished = journal.resumed_cases(),
                "resuming an interrupted run"
            );
            Some(journal)
        }
    };
    // Stale cases: those naming an entity edited since the version their provenance records,
    // or since the accepted run (a damaged acceptance is a warning, not a failed run).
    let accepted = match freshness::accepted_digests(&settings.root) {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!("stale cases: the accepted run could not be read: {e}");
            None
        }
    };
    // Each entity's digest now, which only a comparison with the accepted run needs (computed
    // once: the RunLog records the same fingerprint).
    let fingerprint = match &accepted {
        Some(_) => Some(run::kb_fingerprint(&kb)?),
        None => None,
    };
    let now = fingerprint
        .as_ref()
        .map(|f| f.entities.clone())
        .unwrap_or_default();
    let mut stale = freshness::StaleCheck::new(&*store, now, accepted);
    // In batch mode a semantic case waits on its batch, not on the provider: as many wait at
    // once as one batch takes, unless --concurrency says otherwise.
    let semantic_concurrency = if calls.is_batched() {
        settings.providers.batch_max_requests
    } else {
        settings.semantic.concurrency
    };
    let options = RunOptions {
        concurrency: setup.concurrency.unwrap_or(semantic_concurrency),
        journal: journal.as_mut(),
        repeat: setup.repeat.max(1),
        // An unsaved run keeps no run log: its RunLog must list every case.
        list_all: !setup.save,
        hook: Some(&mut stale),
        kb: fingerprint,
    };
    let mut log = run::run(project, request, backends, options, observer).await?;
    let (stale, stale_more, stale_problem) = stale.finish();
    log.stale = stale;
    log.stale_more = stale_more;
    log.warnings.extend(stale_problem);
    log.rate_limits = calls.rate_limit_records();
    log.warnings.extend(ref_warnings);
    if let Some(search) = &search {
        log.setup.extend(search.setup_entries());
    }
    if let Some(answer) = &answer {
        log.setup.insert("answer".to_owned(), answer.describe());
    }
    // Until the run is saved its run log is the journal.
    let run_log = journal
        .as_ref()
        .filter(|_| !log.is_complete())
        .map(|_| journal_path.clone());
    if let Some(baseline) = &setup.baseline {
        compare_with_baseline(settings, baseline, &mut log, run_log.as_deref())?;
    }

    let json;
    let saved = if setup.save {
        // A run too large to list whole keeps its run log (the journal, moved beside the
        // RunLog); one whose RunLog lists every case needs no second copy of them.
        let cases = journal
            .as_ref()
            .filter(|_| !log.is_complete())
            .map(|_| journal_path.as_path());
        let (rendered, saved) = save_log(settings, &mut log, cases)?;
        json = rendered;
        Some(saved)
    } else {
        log.cases = None;
        // An unsaved shard lists every case; their digest lets `assay runs merge` take its
        // RunLog (`--json`) as it takes a saved one.
        if log.shard.is_some() {
            let digest = caselog::cases_digest(&log, None).map_err(|e| {
                HarnessError::Infrastructure(format!("cannot digest the run's cases: {e}"))
            })?;
            if let Some(shard) = log.shard.as_mut() {
                shard.cases_sha256 = Some(digest);
            }
        }
        json = assay_report::json(&log);
        None
    };
    // Everything is written: the journal has done its job.
    if let Some(journal) = journal {
        journal.finish()?;
    }
    Ok(RunOutcome {
        log,
        json,
        saved,
        usage: calls.usage(),
        usage_report: calls.usage_report(),
    })
}

/// The entities changed since the run `reference` (`spec` is how it was named), against the
/// project's store as a run would read it (refreshed from the `kb/` files where those are the
/// source of truth): what `assay run --changed-since` selects by.
pub fn changed_since(
    project: &Project,
    reference: &RunLog,
    spec: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<freshness::ChangedEntities, HarnessError> {
    let store = engine::open_store_with(&project.settings, env)?;
    engine::sync_kb(&store, project)?;
    let kb = engine::snapshot(&*store)?;
    let now = run::kb_fingerprint(&kb)?;
    let mut changed = freshness::changed_entities(reference, spec, &now, &kb)?;
    changed.answer_contexts = freshness::answer_contexts(project, spec, reference)?;
    Ok(changed)
}

/// Compares `log` with `baseline` (the current run's cases read from `run_log`, its run log,
/// when the RunLog lists only the worst) under `[gate]`'s rules: the comparison, unchanged
/// cases left out, goes into the RunLog.
pub fn compare_with_baseline(
    settings: &assay_project::settings::ProjectSettings,
    baseline: &crate::baseline::Baseline,
    log: &mut RunLog,
    run_log: Option<&std::path::Path>,
) -> Result<(), HarnessError> {
    let current = caselog::case_scores(log, run_log)
        .map_err(|e| HarnessError::Infrastructure(e.to_string()))?;
    let diff = crate::baseline::compare(baseline, log, &current, &settings.regression);
    log.baseline = Some(Box::new(diff.without_unchanged()));
    Ok(())
}

/// Saves `log` in the results folder: `results_<stamp>.json`, the Markdown and HTML reports,
/// and, when the RunLog lists only the worst cases, its run log `cases` (moved beside it as
/// `cases_<stamp>.jsonl`, its SHA-256 recorded in the RunLog). Returns the RunLog's JSON as
/// saved, and where everything went.
pub fn save_log(
    settings: &assay_project::settings::ProjectSettings,
    log: &mut RunLog,
    cases: Option<&std::path::Path>,
) -> Result<(String, SavedResults), HarnessError> {
    let dir = &settings.results_dir;
    if log.is_complete() || cases.is_none() {
        log.cases = None;
    }
    let cases = cases.filter(|_| log.cases.is_some());
    // The run log's digest, recorded in the RunLog: every reader checks it, so a run log
    // changed after the save is named, never believed.
    if let (Some(path), Some(c)) = (cases, log.cases.as_mut()) {
        c.sha256 = Some(crate::caselog::digest(path).map_err(|e| {
            HarnessError::Infrastructure(format!("cannot read {}: {e}", path.display()))
        })?);
    }
    // A shard's cases get a digest whether they are listed or streamed: the merge computes it
    // again, so a case changed after the save is refused, never merged.
    if log.shard.is_some() {
        let digest = crate::caselog::cases_digest(log, cases).map_err(|e| {
            HarnessError::Infrastructure(format!("cannot read the run's cases: {e}"))
        })?;
        if let Some(shard) = log.shard.as_mut() {
            shard.cases_sha256 = Some(digest);
        }
    }
    let stamp = results::stamp(&log.timestamp);
    let mut render = |name: Option<&str>| {
        if let Some(c) = log.cases.as_mut() {
            match name {
                Some(name) => name.clone_into(&mut c.file),
                None => log.cases = None,
            }
        }
        results::Rendered {
            json: assay_report::json(log),
            markdown: assay_report::markdown::render(log),
            html: assay_report::html::render(log),
        }
    };
    let mut rendered_json = String::new();
    let saved = results::save(dir, &stamp, cases, &mut |name| {
        let r = render(name);
        rendered_json.clone_from(&r.json);
        r
    })
    .map_err(|e| {
        HarnessError::Infrastructure(format!("cannot save results in {}: {e}", dir.display()))
    })?;
    Ok((rendered_json, saved))
}

/// The first stage of the semantic bank, ready to search: the pipeline over fresh entity
/// embeddings and the embedded prompts.
struct SemanticParts {
    pipeline: Pipeline,
    queries: HashMap<String, Result<Vec<f32>, String>>,
    /// The embedder's `vendor/model` name.
    model: String,
    /// First-stage candidates (tuned for the embedder, else `[semantic] candidates`).
    candidates: usize,
    /// The threshold tuned for the embedder, if any.
    threshold: Option<f32>,
    /// How the pipeline searches.
    search: SearchChoice,
}

/// Chooses and wraps the embedder, brings the store's entity embeddings up to date, builds
/// the pipeline and embeds `prompts`.
async fn semantic_parts(
    project: &Project,
    store: &OpenStore,
    kb: &dyn KnowledgeBase,
    embedder_flag: Option<&str>,
    calls: &ProviderCalls,
    env: &dyn Fn(&str) -> Option<String>,
    prompts: &[String],
) -> Result<SemanticParts, HarnessError> {
    let settings = &project.settings;
    let choice = engine::choose_embedder(settings, embedder_flag, env)?;
    let embedder = calls.embedder(engine::build_embedder(&choice)?);
    let config = engine::retrieval_config(settings, &choice);
    let (pipeline, refreshed, search) =
        engine::prepare_search_pipeline(store, kb, project, embedder.as_ref(), config).await?;
    tracing::info!(
        embedded = refreshed.embedded.len(),
        fresh = refreshed.fresh,
        model = embedder.model(),
        "entity embeddings"
    );
    tracing::info!(search = %search.describe(), reason = %search.reason, "semantic search");
    let queries = engine::embed_queries(embedder.as_ref(), prompts).await;
    Ok(SemanticParts {
        pipeline,
        queries,
        model: embedder.model().to_owned(),
        candidates: engine::semantic_candidates(settings, &choice),
        threshold: engine::tuned_for(settings, &choice).and_then(|t| t.score_threshold),
        search,
    })
}

/// The prompts of the semantic cases the request selects (the others need no embedding).
fn selected_prompts(project: &Project, request: &RunRequest) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    project
        .banks
        .semantic
        .iter()
        .map(|l| &l.case)
        .filter(|c| request.wants(&c.test_id))
        .filter(|c| request.topic.as_ref().is_none_or(|t| c.topics.contains(t)))
        .filter(|c| run::in_shard(request, BankType::Semantic, &c.test_id, true))
        .filter(|c| request.changed.as_ref().is_none_or(|ch| ch.selects(*c)))
        .filter(|c| seen.insert(c.prompt.clone()))
        .map(|c| c.prompt.clone())
        .collect()
}

/// The choices of a calibration beyond its [`CalibrationRequest`]: each `None` falls back to
/// the environment, then `assay.toml`, then the default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CalibrationSetup {
    /// The calibrating chat model (`--model`; else `[calibration] model`).
    pub model: Option<String>,
    /// The embedder that finds each case's top candidates for scope `affected`.
    pub embedder: Option<String>,
    /// The cache mode (`--cache`).
    pub cache: Option<String>,
}

/// Calibrates as `request` says, with the model `setup` names behind the provider-call wrapper;
/// for scope `affected`, each case's top candidates come from the project's embedding search.
///
/// The future is not `Send` (see [`execute`]).
pub async fn calibrate(
    project: &Project,
    request: &CalibrationRequest,
    setup: &CalibrationSetup,
    env: &dyn Fn(&str) -> Option<String>,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<CalibrationOutcome, HarnessError> {
    let settings = &project.settings;
    // Usage errors first, before a model is built or anything is computed.
    crate::calibrate::select_cases(project, request)?;
    let (name, source) = match &setup.model {
        Some(m) => (m.as_str(), "--model"),
        None => (
            settings.calibration.model.as_str(),
            "assay.toml [calibration] model",
        ),
    };
    let calls = ProviderCalls::open(settings, setup.cache.as_deref(), env, true)?;
    let model = calls.chat(
        "calibrator",
        engine::build_chat_model(settings, name, source, env)?,
    );
    let mut request = request.clone();
    if request.concurrency == 0 {
        // In batch mode the cases wait on their batch, as many at once as one batch takes.
        request.concurrency = if calls.is_batched() {
            settings.providers.batch_max_requests
        } else {
            settings.calibration.concurrency
        };
    }
    if request.scope == Scope::Affected && request.top_candidates.is_empty() {
        request.top_candidates =
            top_candidates(project, setup.embedder.as_deref(), &calls, env).await?;
    }
    let outcome = crate::calibrate::calibrate(project, model.as_ref(), &request, now).await?;
    if !outcome.dry_run {
        let changed: Vec<(String, assay_core::bank::ExpectationSet)> = outcome
            .cases
            .iter()
            .filter(|c| c.status == crate::calibrate::CaseStatus::Changed)
            .filter_map(|c| Some((c.test_id.clone(), c.proposed.clone()?)))
            .collect();
        // The calibration is written: a provenance that could not be completed is a warning
        // (the stale check still compares an entity a provenance lacks, by time).
        if let Err(e) = record_expectations(project, &changed, env) {
            tracing::warn!("the provenance of the calibrated generated cases was not updated: {e}");
        }
    }
    let usage = calls.usage_report();
    if !usage.is_empty() {
        tracing::info!("{}", usage.trim_end());
    }
    Ok(outcome)
}

/// Records in the provenance of accepted generated cases every entity their new expectations
/// name (`changed`: test id and expectations, from a calibration or a human override), at the
/// store's current versions, so an edit to one of them makes the case stale
/// ([`assay_project::drafts::record_expectations`]). Returns the test ids whose provenance grew.
pub fn record_expectations(
    project: &Project,
    changed: &[(String, assay_core::bank::ExpectationSet)],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<String>, HarnessError> {
    if changed.is_empty() {
        return Ok(Vec::new());
    }
    let store = engine::open_store_with(&project.settings, env)?;
    engine::sync_kb(&store, project)?;
    let versions = assay_project::provenance::current_versions(&*store)?;
    assay_project::drafts::record_expectations(&project.settings.root, changed, &versions)
}

/// Per semantic case, the ids of its `[semantic] candidates` nearest entities (the first stage
/// of the semantic bank). A case whose prompt could not be embedded is left out, with a
/// warning.
pub async fn top_candidates(
    project: &Project,
    embedder_flag: Option<&str>,
    calls: &ProviderCalls,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<HashMap<String, Vec<String>>, HarnessError> {
    let settings = &project.settings;
    let store = engine::open_store_with(settings, env)?;
    engine::sync_kb(&store, project)?;
    let prompts: Vec<String> = project
        .banks
        .semantic
        .iter()
        .map(|l| l.case.prompt.clone())
        .collect();
    let SemanticParts {
        pipeline,
        queries,
        candidates,
        ..
    } = semantic_parts(
        project,
        &store,
        &*store,
        embedder_flag,
        calls,
        env,
        &prompts,
    )
    .await?;
    let mut out = HashMap::new();
    for located in &project.banks.semantic {
        let case = &located.case;
        match queries.get(&case.prompt) {
            Some(Ok(query)) => {
                let audience = case
                    .user_state
                    .get("user_type")
                    .and_then(|v| v.as_str())
                    .unwrap_or(assay_core::entity::DEFAULT_AUDIENCE);
                match pipeline.rank(query, &case.prompt, audience, candidates) {
                    Ok(ranked) => {
                        let ids = ranked.into_iter().map(|h| h.entity_id).collect();
                        out.insert(case.test_id.clone(), ids);
                    }
                    Err(e) => {
                        tracing::warn!(test_id = case.test_id, "no top candidates: {e}");
                    }
                }
            }
            Some(Err(e)) => tracing::warn!(test_id = case.test_id, "no top candidates: {e}"),
            None => {}
        }
    }
    Ok(out)
}
