//! The unified runner (000 §6.5): selects cases, runs the banks, aggregates into a RunLog.

use std::time::Instant;

use futures_util::StreamExt;
use opentelemetry::context::FutureExt as _;

use assay_core::aggregate::Aggregator;
use assay_core::bank::BankType;
use assay_core::bank::{AlwaysCase, PatternCase, StateCase};
use assay_core::rundiff::KbFingerprint;
use assay_core::runlog::{CaseLog, RunFilters, RunLog, SCHEMA_VERSION, ShardRun};
use assay_core::shard::Shard;
use assay_core::verdict::VerdictRules;

use assay_kb::KnowledgeBase;
use assay_retrieval::StateMatcher;

use crate::HarnessError;
use crate::freshness::CaseHook;
use crate::journal::{Journal, JournalEntry, JournalHeader};
use crate::runners::{self, SemanticRetriever};
use crate::telemetry;
use assay_core::bank::Case;
use assay_project::project::Project;

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunRequest {
    /// The banks to run; empty means all four.
    pub banks: Vec<BankType>,
    /// Only the cases with these ids (`--test`, repeatable, and `--tests-from`); empty for
    /// every case.
    pub tests: std::collections::BTreeSet<String>,
    /// Only semantic cases with this topic (other banks are not run).
    pub topic: Option<String>,
    /// Only the cases of this shard of the suite (`--shard hash:i/n`): each case by a hash of
    /// its bank and test id ([`case_key`]).
    pub shard: Option<Shard>,
    /// Only the cases that name an entity changed since a run (`--changed-since`), and the
    /// always cases of those entities' audiences.
    pub changed: Option<crate::freshness::ChangedEntities>,
    /// The pending drafts the project's banks include (`--include-drafts`,
    /// [`crate::freshness::include_drafts`]), recorded in the RunLog's filters.
    pub drafts: Option<usize>,
}

impl RunRequest {
    /// Whether the request's case ids (if any) hold `test_id`.
    pub fn wants(&self, test_id: &str) -> bool {
        self.tests.is_empty() || self.tests.contains(test_id)
    }
}

/// The stable key a case is sharded by: `<bank>/<test_id>`.
pub fn case_key(bank: BankType, test_id: &str) -> String {
    format!("{}/{test_id}", bank.key())
}

/// The systems under test of a run.
#[derive(Clone, Copy)]
pub struct Backends<'a> {
    /// The knowledge base the always and state banks read (the store after import, or a
    /// snapshot of it).
    pub kb: &'a dyn KnowledgeBase,
    /// The semantic pipeline, when one is configured.
    pub semantic: Option<&'a dyn SemanticRetriever>,
    /// The answer bank's product, context and judge, when the project has answer cases and
    /// the run selects them.
    pub answer: Option<&'a crate::answer::AnswerBackend>,
}

impl<'a> Backends<'a> {
    /// The project's own files as the knowledge base, and no semantic pipeline.
    pub fn files(project: &'a Project) -> Backends<'a> {
        Backends {
            kb: &project.kb.kb,
            semantic: None,
            answer: None,
        }
    }
}

/// Parses a bank list as `--banks` and the HTTP API's `banks` take it: `all` (or nothing) for
/// every bank, else a comma-separated list of `semantic`, `state`, `pattern`, `always`. The
/// error names the unknown bank.
pub fn parse_banks(spec: &str) -> Result<Vec<BankType>, String> {
    let spec = spec.trim();
    if spec.is_empty() || spec.eq_ignore_ascii_case("all") {
        return Ok(Vec::new());
    }
    spec.split(',')
        .map(|b| {
            let b = b.trim().to_ascii_lowercase();
            BankType::from_key(&b).ok_or_else(|| {
                format!(
                    "unknown bank `{b}` (expected all, or a comma-separated list of semantic, state, pattern, always)"
                )
            })
        })
        .collect()
}

/// How to run.
#[derive(Debug)]
pub struct RunOptions<'a> {
    /// Semantic cases in flight at once (default 4).
    pub concurrency: usize,
    /// Where finished cases are journaled (and, on resume, found).
    pub journal: Option<&'a mut Journal>,
    /// Times each semantic case runs (`--repeat`; 1 by default).
    pub repeat: u32,
    /// Keep every case in the RunLog's lists, however many (a run whose journal is not kept
    /// as its run log). Without a journal every case is kept anyway.
    pub list_all: bool,
    /// Hears of every case the run takes (the stale-case check).
    pub hook: Option<&'a mut dyn CaseHook>,
    /// The fingerprint of the backends' knowledge base, when the caller already computed it
    /// (it is computed here otherwise).
    pub kb: Option<KbFingerprint>,
}

impl Default for RunOptions<'_> {
    fn default() -> Self {
        RunOptions {
            concurrency: 4,
            journal: None,
            repeat: 1,
            list_all: false,
            hook: None,
            kb: None,
        }
    }
}

/// Hears about progress (a progress bar, a journal).
pub trait RunObserver {
    /// A bank is about to run `cases` cases.
    fn bank_started(&mut self, _bank: BankType, _cases: usize) {}
    /// A case finished; `score` is `None` for an error.
    fn case_finished(&mut self, _bank: BankType, _test_id: &str, _score: Option<u32>) {}
    /// A bank finished.
    fn bank_finished(&mut self, _bank: BankType) {}
    /// The run's provider calls go through `limits` (called before any bank starts, when the
    /// run calls providers): [`assay_providers::RateLimits::held_back`] says whether a rate
    /// limit holds callers back, for a progress display to show.
    fn rate_limits(&mut self, _limits: std::sync::Arc<assay_providers::RateLimits>) {}
}

/// An observer that ignores everything.
#[derive(Debug, Default)]
pub struct Quiet;

impl RunObserver for Quiet {}

/// The cases of a bank held whole that `request` selects, in the bank's order; `sharded`
/// keeps only those of the request's shard.
fn selected<'a, C: Case>(
    cases: &'a [assay_project::banks::Located<C>],
    bank: BankType,
    id: impl Fn(&C) -> &str,
    request: &RunRequest,
    extra: impl Fn(&C) -> bool,
    sharded: bool,
) -> Vec<&'a C> {
    cases
        .iter()
        .map(|l| &l.case)
        .filter(|c| request.wants(id(c)))
        .filter(|c| extra(c))
        .filter(|c| request.changed.as_ref().is_none_or(|ch| ch.selects(*c)))
        .filter(|c| in_shard(request, bank, id(c), sharded))
        .collect()
}

/// Whether the case is in the request's shard (always, without one or unless `sharded`).
pub(crate) fn in_shard(request: &RunRequest, bank: BankType, test_id: &str, sharded: bool) -> bool {
    !sharded
        || request
            .shard
            .is_none_or(|s| s.contains(&case_key(bank, test_id)))
}

/// Runs what `request` asks for.
///
/// `backends.semantic` is the system under test of the semantic bank. When it is `None`, a semantic bank
/// selected implicitly (all banks) is skipped with a warning, and one asked for explicitly is a
/// usage error.
///
/// Semantic cases run `options.concurrency` at a time (the provider wrapper still enforces its
/// own rate limits); results keep the bank's order. With a journal, each finished case is
/// appended as it finishes, and cases the journal already holds (a resumed run) are not run
/// again; the run keeps the journal's run id and timestamp.
pub async fn run(
    project: &Project,
    request: &RunRequest,
    backends: Backends<'_>,
    options: RunOptions<'_>,
    observer: &mut dyn RunObserver,
) -> Result<RunLog, HarnessError> {
    let semantic = backends.semantic;
    let started = Instant::now();
    let mut journal = options.journal;
    let mut hook = options.hook;
    let fingerprint = options.kb;
    let (run_id, timestamp) = match &journal {
        Some(j) => (j.header().run_id.clone(), j.header().timestamp.clone()),
        None => (
            uuid::Uuid::new_v4().to_string(),
            chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        ),
    };
    let mut warnings = project.warnings.clone();
    let explicit = !request.banks.is_empty() || request.topic.is_some();
    let mut banks: Vec<BankType> = if request.topic.is_some() {
        if !request.banks.is_empty() && !request.banks.contains(&BankType::Semantic) {
            return Err(HarnessError::Usage(
                "--topic selects semantic cases; add `semantic` to --banks".into(),
            ));
        }
        vec![BankType::Semantic]
    } else if request.banks.is_empty() {
        BankType::ALL.to_vec()
    } else {
        BankType::ALL
            .into_iter()
            .filter(|b| request.banks.contains(b))
            .collect()
    };

    let b = &project.banks;
    let topic_ok = |topics: &[String]| request.topic.as_ref().is_none_or(|t| topics.contains(t));
    let semantic_cases = selected(
        &b.semantic,
        BankType::Semantic,
        |c| &c.test_id,
        request,
        |c| topic_ok(&c.topics),
        true,
    );
    let state_cases = selected(
        &b.state,
        BankType::State,
        |c| &c.test_id,
        request,
        |_| true,
        true,
    );
    let pattern_cases = selected(
        &b.pattern,
        BankType::Pattern,
        |c| &c.test_id,
        request,
        |_| true,
        true,
    );
    let always_cases = selected(
        &b.always,
        BankType::Always,
        |c| &c.test_id,
        request,
        |_| true,
        true,
    );
    let answer_cases = selected(
        &b.answer,
        BankType::Answer,
        |c| &c.test_id,
        request,
        |_| true,
        true,
    );

    // A project without answer cases has no answer bank: it is not listed as run. A shard
    // that holds none of the suite's answer cases still lists it, as its sibling shards do,
    // so that they merge.
    let suite_answers = request.shard.is_some()
        && !selected(
            &b.answer,
            BankType::Answer,
            |c| &c.test_id,
            request,
            |_| true,
            false,
        )
        .is_empty();
    if answer_cases.is_empty() && !suite_answers && !request.banks.contains(&BankType::Answer) {
        banks.retain(|b| *b != BankType::Answer);
    }
    if !request.tests.is_empty() {
        // Run only the banks that hold the cases; every id must name a case of the selected
        // banks (whatever its shard: shards of one selection agree on their banks).
        let mut holders: Vec<BankType> = Vec::new();
        let mut known: std::collections::HashSet<&str> = std::collections::HashSet::new();
        for bank in BankType::ALL {
            if banks.contains(&bank) {
                let held = held_ids(project, request, bank);
                if !held.is_empty() {
                    holders.push(bank);
                }
                known.extend(held);
            }
        }
        check_tests_known(request, |t| known.contains(t), &banks)?;
        banks = holders;
    }
    if let Some(topic) = &request.topic
        && semantic_cases.is_empty()
    {
        return Err(HarnessError::Usage(format!(
            "no semantic case has topic `{topic}`"
        )));
    }
    if banks.contains(&BankType::Semantic) && semantic.is_none() {
        if explicit || !request.tests.is_empty() {
            return Err(HarnessError::Usage(
                "the semantic bank needs a retriever (embedder and reranker), and none is configured".into(),
            ));
        }
        banks.retain(|b| *b != BankType::Semantic);
        if !semantic_cases.is_empty() {
            warnings.push(format!(
                "semantic bank skipped: {} cases need a retriever (embedder and reranker), and none is configured",
                semantic_cases.len()
            ));
        }
    }
    if banks.contains(&BankType::Answer) && backends.answer.is_none() && !answer_cases.is_empty() {
        if request.banks.contains(&BankType::Answer) || !request.tests.is_empty() {
            return Err(HarnessError::Usage(
                "the answer bank needs the product (the `[optimize]` target) and a judge (`[answer] judge_model`), and this run has none".into(),
            ));
        }
        banks.retain(|b| *b != BankType::Answer);
        warnings.push(format!(
            "answer bank skipped: {} cases need the product (the `[optimize]` target) and a judge, and this run has none",
            answer_cases.len()
        ));
    }
    // A shard reads the whole suite's ids first: what it records to be merged by (the suite's
    // digest and size) and how many cases of each streamed bank are its own.
    let shard_run = match request.shard {
        Some(shard) => Some(shard_of_suite(project, request, &banks, shard)?),
        None => None,
    };
    // With --changed-since only some of a streamed bank's cases run: they are counted first.
    let changed_counts = match &request.changed {
        Some(_) => Some(count_streamed(project, request, &banks)?),
        None => None,
    };
    let streamed_count = |bank: BankType| match (&shard_run, &changed_counts) {
        (Some((_, counts)), _) | (None, Some(counts)) => counts.get(&bank).copied().unwrap_or(0),
        (None, None) => project.banks.streamed(bank).map_or(0, |s| s.count),
    };
    let bank_total = |bank: &BankType| match bank {
        BankType::Semantic => semantic_cases.len(),
        BankType::State => state_cases.len() + streamed_count(BankType::State),
        BankType::Pattern => pattern_cases.len() + streamed_count(BankType::Pattern),
        BankType::Always => always_cases.len() + streamed_count(BankType::Always),
        BankType::Answer => answer_cases.len(),
    };
    // What --changed-since records: the cases it ran and those of the same banks it skipped.
    let changed_since = match &request.changed {
        Some(changed) => {
            let unfiltered = RunRequest {
                changed: None,
                ..request.clone()
            };
            let all: usize = banks
                .iter()
                .map(|bank| selected_count(project, &unfiltered, *bank))
                .sum();
            let ran: usize = banks.iter().map(bank_total).sum();
            // A bank none of whose cases is selected is not run at all (it would score as
            // an empty bank).
            banks.retain(|bank| bank_total(bank) > 0);
            Some(assay_core::runlog::ChangedSince {
                reference: changed.reference.clone(),
                run_id: changed.run_id.clone(),
                entities: changed
                    .entities
                    .iter()
                    .take(assay_core::runlog::ChangedSince::LISTED)
                    .cloned()
                    .collect(),
                entity_count: changed.entities.len(),
                ran,
                skipped: all.saturating_sub(ran),
            })
        }
        None => None,
    };
    let selected_total: usize = banks.iter().map(bank_total).sum();
    // A shard of a selection by id may hold none of it (two shards, one case): it runs no case
    // and merges with its siblings.
    let empty_shard_of_selection = request.shard.is_some() && !request.tests.is_empty();
    if selected_total == 0 && !empty_shard_of_selection {
        if let Some(changed) = &request.changed {
            return Err(HarnessError::Usage(format!(
                "--changed-since {}: no case of the selected banks names the {} entities changed since",
                changed.reference,
                changed.entities.len()
            )));
        }
        if let (Some(shard), Some((run, _))) = (request.shard, &shard_run)
            && run.suite_cases > 0
        {
            return Err(HarnessError::Usage(format!(
                "--shard {shard}: this shard holds none of the suite's {} cases; split it into fewer shards",
                run.suite_cases
            )));
        }
        return Err(HarnessError::Usage(
            "no cases selected: the selected banks are empty".into(),
        ));
    }

    // With a journal (the run log) every case is written as it finishes and only the worst
    // few of each bank stay in memory for the reports; without one the RunLog keeps them all.
    let keep_all = journal.is_none() || options.list_all;
    // Each case's verdict is decided as it finishes, under the project's rules.
    let rules = &project.settings.verdict;
    let mut agg = Aggregator::new(LISTED, if keep_all { usize::MAX } else { LISTED_WHOLE });
    let repeats = options.repeat.max(1);
    for bank in &banks {
        match bank {
            BankType::Semantic => {
                let Some(retriever) = semantic else { continue };
                held_bank(
                    *bank,
                    &semantic_cases,
                    options.concurrency.max(1),
                    rules,
                    &mut journal,
                    &mut hook,
                    observer,
                    &mut agg,
                    |case| async move {
                        let resolved = project.expectations.resolve(case);
                        JournalEntry::Semantic(
                            runners::run_semantic_repeated(retriever, case, &resolved, repeats)
                                .await,
                        )
                    },
                )
                .await?;
            }
            BankType::State => {
                let matcher = StateMatcher::from_kb(backends.kb)
                    .map_err(|e| HarnessError::Usage(e.to_string()))?;
                let mut sink = Sink::new(*bank, journal.as_deref_mut(), observer, &mut agg, rules);
                sink.observer
                    .bank_started(*bank, state_cases.len() + streamed_count(*bank));
                for case in &state_cases {
                    if let Some(h) = hook.as_deref_mut() {
                        h.case(*bank, *case);
                    }
                    sink.case(&case.test_id, |_| {
                        Ok(JournalEntry::State(runners::run_state_case(&matcher, case)))
                    })?;
                }
                stream_bank(project, *bank, request, &mut |case: StateCase| {
                    if let Some(h) = hook.as_deref_mut() {
                        h.case(BankType::State, &case);
                    }
                    sink.case(&case.test_id, |_| {
                        Ok(JournalEntry::State(runners::run_state_case(
                            &matcher, &case,
                        )))
                    })
                })?;
                sink.finish()?;
            }
            BankType::Pattern => {
                let mut sink = Sink::new(*bank, journal.as_deref_mut(), observer, &mut agg, rules);
                sink.observer
                    .bank_started(*bank, pattern_cases.len() + streamed_count(*bank));
                if let Some(matcher) = &project.patterns {
                    for case in &pattern_cases {
                        if let Some(h) = hook.as_deref_mut() {
                            h.case(*bank, *case);
                        }
                        sink.case(&case.test_id, |_| {
                            Ok(JournalEntry::Pattern(runners::run_pattern_case(
                                matcher, case,
                            )))
                        })?;
                    }
                    stream_bank(project, *bank, request, &mut |case: PatternCase| {
                        if let Some(h) = hook.as_deref_mut() {
                            h.case(BankType::Pattern, &case);
                        }
                        sink.case(&case.test_id, |_| {
                            Ok(JournalEntry::Pattern(runners::run_pattern_case(
                                matcher, &case,
                            )))
                        })
                    })?;
                }
                sink.finish()?;
            }
            BankType::Always => {
                let mut sink = Sink::new(*bank, journal.as_deref_mut(), observer, &mut agg, rules);
                sink.observer
                    .bank_started(*bank, always_cases.len() + streamed_count(*bank));
                for case in &always_cases {
                    if let Some(h) = hook.as_deref_mut() {
                        h.case(*bank, *case);
                    }
                    sink.case(&case.test_id, |_| {
                        runners::run_always_case(backends.kb, case)
                            .map(JournalEntry::Always)
                            .map_err(|e| HarnessError::Infrastructure(e.to_string()))
                    })?;
                }
                stream_bank(project, *bank, request, &mut |case: AlwaysCase| {
                    if let Some(h) = hook.as_deref_mut() {
                        h.case(BankType::Always, &case);
                    }
                    sink.case(&case.test_id, |_| {
                        runners::run_always_case(backends.kb, &case)
                            .map(JournalEntry::Always)
                            .map_err(|e| HarnessError::Infrastructure(e.to_string()))
                    })
                })?;
                sink.finish()?;
            }
            BankType::Answer => {
                let Some(backend) = backends.answer else {
                    continue;
                };
                let in_flight = if backend.system.stateless() {
                    backend.config.concurrency.max(1)
                } else {
                    1
                };
                let ran = held_bank(
                    *bank,
                    &answer_cases,
                    in_flight,
                    rules,
                    &mut journal,
                    &mut hook,
                    observer,
                    &mut agg,
                    |case| async move {
                        JournalEntry::Answer(crate::answer::run_case(backend, case).await)
                    },
                )
                .await;
                backend.system.close().await;
                ran?;
            }
        }
    }
    let Finished {
        results,
        notable,
        cases: case_count,
        summary,
    } = Finished::of(project, agg, repeats);
    Ok(RunLog {
        schema_version: SCHEMA_VERSION,
        assay_version: env!("CARGO_PKG_VERSION").to_owned(),
        run_id,
        project: project.settings.root.display().to_string(),
        timestamp,
        duration_ms: started.elapsed().as_millis() as u64,
        setup: semantic
            .map(|s| {
                [("semantic".to_owned(), s.describe())]
                    .into_iter()
                    .collect()
            })
            .unwrap_or_default(),
        filters: {
            let mut filters = RunFilters {
                banks,
                test: None,
                tests: Vec::new(),
                topic: request.topic.clone(),
                changed_since,
                drafts: request.drafts,
                banks_left_out: banks_left_out(project, request),
            };
            filters.set_tests(&request.tests);
            filters
        },
        summary,
        semantic: results.semantic,
        state: results.state,
        pattern: results.pattern,
        always: results.always,
        answer: results.answer,
        warnings,
        rate_limits: Vec::new(),
        settings: project.settings.recorded.clone(),
        kb: match fingerprint {
            Some(f) => f,
            None => kb_fingerprint(backends.kb)?,
        },
        baseline: None,
        // The run log: the journal while the run lives; saving moves it beside the RunLog.
        cases: (!keep_all).then(|| CaseLog {
            file: JOURNALED.to_owned(),
            count: case_count,
            sha256: None,
        }),
        notable_cases: Some(notable),
        shard: shard_run.map(|(run, _)| run),
        merged: None,
        stale: Vec::new(),
        stale_more: 0,
    })
}

/// Runs the cases of a bank held in memory whose cases call out (semantic, answer): the cases
/// the journal already holds are taken from it, the others run `in_flight` at a time, each in
/// its case and stage spans, journaled and aggregated as it finishes (results keep the bank's
/// order through their index).
#[allow(clippy::too_many_arguments)]
async fn held_bank<'c, C, F, Fut>(
    bank: BankType,
    cases: &[&'c C],
    in_flight: usize,
    rules: &VerdictRules,
    journal: &mut Option<&mut Journal>,
    hook: &mut Option<&mut dyn CaseHook>,
    observer: &mut dyn RunObserver,
    agg: &mut Aggregator,
    run_one: F,
) -> Result<(), HarnessError>
where
    C: Case,
    F: Fn(&'c C) -> Fut,
    Fut: std::future::Future<Output = JournalEntry>,
{
    observer.bank_started(bank, cases.len());
    agg.start(bank, cases.len());
    let mut todo = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        if let Some(h) = hook.as_deref_mut() {
            h.case(bank, *case);
        }
        match journal
            .as_deref()
            .and_then(|j| j.finished(bank, case.test_id()))
        {
            Some(done) => {
                observer.case_finished(bank, done.test_id(), done.score());
                agg.push(i, done.clone());
            }
            None => todo.push(i),
        }
    }
    let run_one = &run_one;
    let mut running = futures_util::stream::iter(todo)
        .map(|i| async move {
            let case = cases[i];
            let spans = telemetry::case_spans();
            let started = Instant::now();
            let mut record = run_one(case).with_context(spans.context()).await;
            record.settle(millis(started), rules);
            (i, record, spans)
        })
        .buffer_unordered(in_flight);
    while let Some((i, record, spans)) = running.next().await {
        telemetry::finish_case(spans, &record);
        if let Some(j) = journal.as_deref_mut() {
            j.record(&record)?;
        }
        observer.case_finished(bank, record.test_id(), record.score());
        agg.push(i, record);
    }
    observer.bank_finished(bank);
    Ok(())
}

/// The test ids of the cases `request` selects in a bank held whole (the semantic and answer
/// banks, or any bank of a project loaded whole), whatever their shard, in file order; none for
/// a bank read case by case.
fn held_ids<'a>(project: &'a Project, request: &RunRequest, bank: BankType) -> Vec<&'a str> {
    let b = &project.banks;
    let topic_ok = |topics: &[String]| request.topic.as_ref().is_none_or(|t| topics.contains(t));
    fn ids<'a, C: Case>(
        cases: &'a [assay_project::banks::Located<C>],
        bank: BankType,
        request: &RunRequest,
        extra: impl Fn(&C) -> bool,
    ) -> Vec<&'a str> {
        selected(cases, bank, C::test_id, request, extra, false)
            .into_iter()
            .map(C::test_id)
            .collect()
    }
    match bank {
        BankType::Semantic => ids(&b.semantic, bank, request, |c| topic_ok(&c.topics)),
        BankType::State => ids(&b.state, bank, request, |_| true),
        BankType::Pattern => ids(&b.pattern, bank, request, |_| true),
        BankType::Always => ids(&b.always, bank, request, |_| true),
        BankType::Answer => ids(&b.answer, bank, request, |_| true),
    }
}

/// Refuses a request whose case ids (`--test`, `--tests-from`) name cases that are not in
/// `banks` (`known` says which are), naming the first five.
fn check_tests_known(
    request: &RunRequest,
    known: impl Fn(&str) -> bool,
    banks: &[BankType],
) -> Result<(), HarnessError> {
    let unknown: Vec<&str> = request
        .tests
        .iter()
        .map(String::as_str)
        .filter(|t| !known(t))
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    let shown: Vec<String> = unknown.iter().take(5).map(|t| format!("`{t}`")).collect();
    Err(HarnessError::Usage(format!(
        "no case with test_id {}{} in the selected banks ({})",
        shown.join(", "),
        if unknown.len() > 5 {
            format!(" (and {} more)", unknown.len() - 5)
        } else {
            String::new()
        },
        banks.iter().map(|b| b.key()).collect::<Vec<_>>().join(", ")
    )))
}

/// The cases `request` selects, in the order a run takes them (`assay run --list`): its
/// banks (all by default, semantic only with a topic), its case ids (each must name a case, as
/// for a run), its shard.
pub fn list_cases(
    project: &Project,
    request: &RunRequest,
) -> Result<Vec<(BankType, String)>, HarnessError> {
    let banks: Vec<BankType> = if request.topic.is_some() {
        vec![BankType::Semantic]
    } else if request.banks.is_empty() {
        BankType::ALL.to_vec()
    } else {
        BankType::ALL
            .into_iter()
            .filter(|b| request.banks.contains(b))
            .collect()
    };
    let mut cases = Vec::new();
    let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
    for_each_suite_case(project, request, &banks, &mut |bank, test_id, _| {
        seen.insert(test_id.to_owned());
        if in_shard(request, bank, test_id, true) {
            cases.push((bank, test_id.to_owned()));
        }
    })?;
    check_tests_known(request, |t| seen.contains(t), &banks)?;
    Ok(cases)
}

/// Calls `each` with the bank and test id of every case `request` selects in `banks`, whatever
/// its shard, in the order a run takes them: bank by bank, each bank's cases in file order
/// (`streamed` says whether the case comes from a bank read case by case). What a shard
/// records of its suite, and the order a merge restores.
pub fn for_each_suite_case(
    project: &Project,
    request: &RunRequest,
    banks: &[BankType],
    each: &mut dyn FnMut(BankType, &str, bool),
) -> Result<(), HarnessError> {
    #[derive(serde::Deserialize)]
    struct IdOnly {
        test_id: String,
    }
    for &bank in banks {
        let ids = held_ids(project, request, bank);
        for test_id in ids {
            each(bank, test_id, false);
        }
        if matches!(bank, BankType::Semantic | BankType::Answer) {
            continue;
        }
        let Some(streamed) = project.banks.streamed(bank) else {
            continue;
        };
        let mut quiet = |_: String| {};
        for path in &streamed.files {
            let mut one = |_: usize, case: IdOnly| {
                if request.wants(&case.test_id) {
                    each(bank, &case.test_id, true);
                }
                Ok(())
            };
            assay_project::banks::for_each_case(path, bank, &mut quiet, &mut one)?;
        }
    }
    Ok(())
}

/// What a run of `shard` records of its suite (the digest of every selected case's key in run
/// order, and their number), with the number of the shard's own cases in each streamed bank.
fn shard_of_suite(
    project: &Project,
    request: &RunRequest,
    banks: &[BankType],
    shard: Shard,
) -> Result<(ShardRun, std::collections::HashMap<BankType, usize>), HarnessError> {
    let mut digest = SuiteDigest::default();
    let mut streamed = std::collections::HashMap::new();
    for_each_suite_case(
        project,
        request,
        banks,
        &mut |bank, test_id, is_streamed| {
            let key = digest.add(bank, test_id);
            if is_streamed && shard.contains(&key) {
                *streamed.entry(bank).or_insert(0) += 1;
            }
        },
    )?;
    Ok((digest.finish(shard), streamed))
}

/// The digest of a suite's case keys, in order.
#[derive(Default)]
pub struct SuiteDigest {
    hash: sha2::Sha256,
    cases: usize,
}

impl SuiteDigest {
    /// Adds a case; returns its key.
    pub fn add(&mut self, bank: BankType, test_id: &str) -> String {
        use sha2::Digest as _;
        let key = case_key(bank, test_id);
        self.hash.update(key.as_bytes());
        self.hash.update(b"\n");
        self.cases += 1;
        key
    }

    /// The record of a shard of this suite.
    pub fn finish(self, shard: Shard) -> ShardRun {
        use sha2::Digest as _;
        let digest = self.hash.finalize();
        ShardRun {
            shard,
            suite_cases: self.cases,
            suite: digest[..8].iter().fold(String::new(), |mut out, b| {
                use std::fmt::Write as _;
                let _ = write!(out, "{b:02x}");
                out
            }),
            // Recorded when the run is saved (`session::save_log`), over the cases as saved.
            cases_sha256: None,
        }
    }
}

/// What a run's cases add up to, once the last is in the aggregator: a run and a merge of
/// shards (`crate::merge`) both finish with it, so the two give the same numbers.
pub(crate) struct Finished {
    /// Each bank's results (the semantic bank's with its repeats).
    pub results: assay_core::runlog::BankResults,
    /// What the summary shows besides the numbers.
    pub notable: assay_core::aggregate::Notable,
    /// The cases run.
    pub cases: usize,
    /// Scores, weights and health.
    pub summary: assay_core::runlog::Summary,
}

impl Finished {
    pub(crate) fn of(project: &Project, agg: Aggregator, repeats: u32) -> Finished {
        let (mut results, notable) = agg.finish();
        results.semantic = results.semantic.map(|s| s.with_repeats(repeats));
        let cases = [
            results.semantic.as_ref().map_or(0, |r| r.tests_run),
            results.state.as_ref().map_or(0, |r| r.tests_run),
            results.pattern.as_ref().map_or(0, |r| r.tests_run),
            results.always.as_ref().map_or(0, |r| r.tests_run),
        ]
        .iter()
        .sum();
        let sources = (!project.banks.semantic.is_empty()).then(|| {
            project
                .expectations
                .summary(project.banks.semantic.iter().map(|l| &l.case))
        });
        let summary = results.summarize(&project.settings.weights, sources);
        Finished {
            results,
            notable,
            cases,
            summary,
        }
    }
}

/// Milliseconds since `started`, to the microsecond.
fn millis(started: Instant) -> f64 {
    (started.elapsed().as_micros() as f64) / 1000.0
}

/// `RunLog.cases.file` while the cases are in the journal; saving the run moves them to
/// `results/cases_<stamp>.jsonl` and names that file instead.
pub const JOURNALED: &str = "journal";

/// A run of at most this many cases lists them all in its RunLog (and in the run log).
pub const LISTED_WHOLE: usize = 5_000;

/// How many of the worst cases of each bank a streamed run's RunLog lists (the run log has
/// every case).
pub const LISTED: usize = 100;

/// Where a deterministic bank's finished cases go: the aggregator, the progress observer and
/// the journal (written in batches: each case takes microseconds, and a crash costs at most a
/// batch's re-run).
struct Sink<'a, 'o> {
    bank: BankType,
    rules: &'a VerdictRules,
    journal: Option<&'a mut Journal>,
    observer: &'o mut dyn RunObserver,
    agg: &'a mut Aggregator,
    index: usize,
    batch: Vec<JournalEntry>,
}

/// Cases journaled per write in a deterministic bank.
const BATCH: usize = 512;

impl<'a, 'o> Sink<'a, 'o> {
    fn new(
        bank: BankType,
        journal: Option<&'a mut Journal>,
        observer: &'o mut dyn RunObserver,
        agg: &'a mut Aggregator,
        rules: &'a VerdictRules,
    ) -> Self {
        agg.start(bank, 0);
        Sink {
            bank,
            rules,
            journal,
            observer,
            agg,
            index: 0,
            batch: Vec::new(),
        }
    }

    /// One case: taken from the journal when a resumed run finished it, else run.
    fn case(
        &mut self,
        test_id: &str,
        run: impl FnOnce(&str) -> Result<JournalEntry, HarnessError>,
    ) -> Result<(), HarnessError> {
        let done = self
            .journal
            .as_deref()
            .and_then(|j| j.finished(self.bank, test_id))
            .cloned();
        let (entry, fresh) = if let Some(entry) = done {
            (entry, false)
        } else {
            let spans = telemetry::case_spans();
            let started = Instant::now();
            let mut entry = run(test_id)?;
            entry.settle(millis(started), self.rules);
            telemetry::finish_case(spans, &entry);
            (entry, true)
        };
        self.observer
            .case_finished(self.bank, entry.test_id(), entry.score());
        if fresh && self.journal.is_some() {
            self.batch.push(entry.clone());
            if self.batch.len() >= BATCH {
                self.flush()?;
            }
        }
        self.agg.push(self.index, entry);
        self.index += 1;
        Ok(())
    }

    fn flush(&mut self) -> Result<(), HarnessError> {
        if let Some(j) = self.journal.as_deref_mut() {
            j.record_all(self.batch.iter())?;
        }
        self.batch.clear();
        Ok(())
    }

    fn finish(mut self) -> Result<(), HarnessError> {
        self.flush()?;
        self.observer.bank_finished(self.bank);
        Ok(())
    }
}

/// Runs `each` on every selected case of a streamed bank, reading its files case by case.
fn stream_bank<C: serde::de::DeserializeOwned + Case>(
    project: &Project,
    bank: BankType,
    request: &RunRequest,
    each: &mut dyn FnMut(C) -> Result<(), HarnessError>,
) -> Result<(), HarnessError> {
    let Some(streamed) = project.banks.streamed(bank) else {
        return Ok(());
    };
    // Warnings were given when the project was loaded.
    let mut quiet = |_: String| {};
    for path in &streamed.files {
        let mut failure: Option<HarnessError> = None;
        let mut run_one = |_: usize, case: C| {
            if !request.wants(Case::test_id(&case))
                || !in_shard(request, bank, Case::test_id(&case), true)
                || request
                    .changed
                    .as_ref()
                    .is_some_and(|ch| !ch.selects(&case))
            {
                return Ok(());
            }
            each(case).map_err(|e| {
                let message = e.to_string();
                failure = Some(e);
                assay_kb::datafile::DataError::new(path, message)
            })
        };
        let read = assay_project::banks::for_each_case(path, bank, &mut quiet, &mut run_one);
        if let Some(e) = failure {
            return Err(e);
        }
        read?;
    }
    Ok(())
}

/// The selected cases of each streamed bank in `banks` (read through once).
fn count_streamed(
    project: &Project,
    request: &RunRequest,
    banks: &[BankType],
) -> Result<std::collections::HashMap<BankType, usize>, HarnessError> {
    let mut counts = std::collections::HashMap::new();
    for &bank in banks {
        let mut n = 0usize;
        let mut count = |_: &dyn Case| {
            n += 1;
            Ok(())
        };
        match bank {
            BankType::Semantic | BankType::Answer => continue,
            BankType::State => {
                stream_bank(project, bank, request, &mut |c: StateCase| count(&c))?;
            }
            BankType::Pattern => {
                stream_bank(project, bank, request, &mut |c: PatternCase| count(&c))?;
            }
            BankType::Always => {
                stream_bank(project, bank, request, &mut |c: AlwaysCase| count(&c))?;
            }
        }
        counts.insert(bank, n);
    }
    Ok(counts)
}

/// The banks holding cases that an explicit `--banks` list leaves out (none without one): what
/// makes a run of a subset of the banks partial.
fn banks_left_out(project: &Project, request: &RunRequest) -> Vec<BankType> {
    if request.banks.is_empty() {
        return Vec::new();
    }
    let every = RunRequest::default();
    BankType::ALL
        .into_iter()
        .filter(|b| !request.banks.contains(b) && selected_count(project, &every, *b) > 0)
        .collect()
}

/// How many cases of `bank` `request` selects (a streamed bank read through when the
/// request filters by changed entities).
fn selected_count(project: &Project, request: &RunRequest, bank: BankType) -> usize {
    let b = &project.banks;
    let topic_ok = |topics: &[String]| request.topic.as_ref().is_none_or(|t| topics.contains(t));
    let held = match bank {
        BankType::Semantic => selected(
            &b.semantic,
            bank,
            |c| &c.test_id,
            request,
            |c| topic_ok(&c.topics),
            true,
        )
        .len(),
        BankType::State => selected(&b.state, bank, |c| &c.test_id, request, |_| true, true).len(),
        BankType::Pattern => {
            selected(&b.pattern, bank, |c| &c.test_id, request, |_| true, true).len()
        }
        BankType::Always => {
            selected(&b.always, bank, |c| &c.test_id, request, |_| true, true).len()
        }
        BankType::Answer => {
            selected(&b.answer, bank, |c| &c.test_id, request, |_| true, true).len()
        }
    };
    let streamed = if bank == BankType::Semantic || request.topic.is_some() {
        0
    } else {
        b.streamed(bank).map_or(0, |s| s.count)
    };
    held + streamed
}

/// How many cases a run of `request` would take, over the banks it selects (the streamed
/// banks read through when it filters by changed entities): `assay run --changed-since`
/// says so and runs nothing when none is selected.
pub fn count_selected(project: &Project, request: &RunRequest) -> Result<usize, HarnessError> {
    let banks: Vec<BankType> = if request.topic.is_some() {
        vec![BankType::Semantic]
    } else if request.banks.is_empty() {
        BankType::ALL.to_vec()
    } else {
        BankType::ALL
            .into_iter()
            .filter(|b| request.banks.contains(b))
            .collect()
    };
    let streamed = if request.changed.is_some() {
        count_streamed(project, request, &banks)?
    } else {
        std::collections::HashMap::new()
    };
    Ok(banks
        .iter()
        .map(|&bank| {
            let all = selected_count(project, request, bank);
            match (request.changed.is_some(), project.banks.streamed(bank)) {
                (true, Some(s)) if bank != BankType::Semantic => {
                    all - s.count + streamed.get(&bank).copied().unwrap_or(0)
                }
                _ => all,
            }
        })
        .sum())
}

/// What a run's knowledge base holds: a SHA-256 digest (16 hex digits) of every entity, active
/// or not, in id order, and of each entity alone when there are not too many.
pub fn kb_fingerprint(kb: &dyn KnowledgeBase) -> Result<KbFingerprint, HarnessError> {
    use sha2::{Digest, Sha256};
    let mut entities = kb.list(&assay_kb::EntityFilter::default())?;
    entities.sort_by(|a, b| a.entity_id.cmp(&b.entity_id));
    let hex = |d: &[u8]| {
        d.iter().take(8).fold(String::new(), |mut out, b| {
            use std::fmt::Write as _;
            let _ = write!(out, "{b:02x}");
            out
        })
    };
    let mut whole = Sha256::new();
    let mut each = std::collections::BTreeMap::new();
    let keep = entities.len() <= KbFingerprint::MAX_ENTITIES;
    for e in &entities {
        let text = json(e);
        whole.update(e.entity_id.as_bytes());
        whole.update(text.as_bytes());
        if keep {
            each.insert(e.entity_id.clone(), hex(&Sha256::digest(text.as_bytes())));
        }
    }
    Ok(KbFingerprint {
        digest: hex(&whole.finalize()),
        count: entities.len(),
        entities: each,
    })
}

/// The case ids of a request as its key records them: `*` for every case, the ids joined by
/// commas when they are few, else their count and a hash of them.
fn tests_key(tests: &std::collections::BTreeSet<String>) -> String {
    if tests.is_empty() {
        return "*".into();
    }
    if tests.len() <= 3 {
        return tests.iter().cloned().collect::<Vec<_>>().join(",");
    }
    let joined: Vec<&str> = tests.iter().map(String::as_str).collect();
    let hash = assay_providers::target::sha256_hex(&joined.join("\0"));
    let hex = &hash[..16];
    format!("{}ids:{hex}", tests.len())
}

/// `banks=…;test=…;topic=…`: a request as the journal header records it.
pub fn request_key(request: &RunRequest) -> String {
    let mut banks: Vec<&str> = request.banks.iter().map(|b| b.key()).collect();
    banks.sort_unstable();
    let mut key = format!(
        "banks={};test={};topic={}",
        if banks.is_empty() {
            "all".to_owned()
        } else {
            banks.join(",")
        },
        tests_key(&request.tests),
        request.topic.as_deref().unwrap_or("*"),
    );
    if let Some(shard) = request.shard {
        key.push_str(&format!(";shard={shard}"));
    }
    if let Some(changed) = &request.changed {
        key.push_str(&format!(";changed={}", changed.key()));
    }
    if let Some(drafts) = request.drafts {
        key.push_str(&format!(";drafts={drafts}"));
    }
    key
}

/// The journal header of a new run of `request`: a fresh run id and timestamp, and a
/// fingerprint of the setup (the semantic retriever's description, the knowledge base's
/// active entities, the resolved expectations and the pattern rules), so that a resume with
/// anything changed is refused.
pub fn journal_header(
    project: &Project,
    request: &RunRequest,
    backends: Backends<'_>,
) -> Result<JournalHeader, HarnessError> {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    let mut entities = backends.kb.list(&assay_kb::EntityFilter {
        active: Some(true),
        ..assay_kb::EntityFilter::default()
    })?;
    entities.sort_by(|a, b| a.entity_id.cmp(&b.entity_id));
    hash.update(json(&entities).as_bytes());
    for located in &project.banks.semantic {
        let resolved = project.expectations.resolve(&located.case);
        hash.update(located.case.test_id.as_bytes());
        hash.update(json(&resolved.expectations).as_bytes());
    }
    hash.update(json(&project.rules).as_bytes());
    if backends.answer.is_some() {
        for located in &project.banks.answer {
            hash.update(json(&located.case).as_bytes());
        }
    }
    let digest = hash.finalize();
    let short = digest[..8].iter().fold(String::new(), |mut out, b| {
        use std::fmt::Write as _;
        let _ = write!(out, "{b:02x}");
        out
    });
    let mut semantic = backends.semantic.map_or_else(
        || "no semantic retriever".to_owned(),
        SemanticRetriever::describe,
    );
    if let Some(answer) = backends.answer {
        // A resumed run must ask the same product and judge.
        semantic.push_str(&format!("; answers: {}", answer.describe()));
    }
    Ok(JournalHeader {
        journal: crate::journal::JOURNAL_VERSION,
        run_id: uuid::Uuid::new_v4().to_string(),
        timestamp: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        request: request_key(request),
        setup: format!("{semantic}; data {short}"),
    })
}

/// JSON text for hashing (a value that cannot be serialised hashes as its error, which is
/// stable too).
fn json<T: serde::Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|e| e.to_string())
}

/// Whether a run passes the project's gate: not CRITICAL, health at least `min_health`,
/// combined score at least `min_score`.
pub fn gate_passed(log: &RunLog, settings: &assay_project::settings::ProjectSettings) -> bool {
    let s = &log.summary;
    s.health_status != assay_core::runlog::Health::Critical
        && s.health_status >= settings.min_health
        && s.combined_score >= settings.min_score
}
