//! The unified runner (000 §6.5): selects cases, runs the banks, aggregates into a RunLog.

use std::time::Instant;

use assay_core::bank::BankType;
use assay_core::runlog::{
    AlwaysResults, BankResults, PatternResults, RunFilters, RunLog, SCHEMA_VERSION,
    SemanticResults, StateResults,
};

use assay_kb::KnowledgeBase;
use assay_retrieval::StateMatcher;

use crate::HarnessError;
use crate::project::Project;
use crate::runners::{self, SemanticRetriever};

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunRequest {
    /// The banks to run; empty means all four.
    pub banks: Vec<BankType>,
    /// Only the case with this id.
    pub test: Option<String>,
    /// Only semantic cases with this topic (other banks are not run).
    pub topic: Option<String>,
}

/// The systems under test of a run.
#[derive(Clone, Copy)]
pub struct Backends<'a> {
    /// The knowledge base the always and state banks read (the store, after import).
    pub kb: &'a dyn KnowledgeBase,
    /// The semantic pipeline, when one is configured.
    pub semantic: Option<&'a dyn SemanticRetriever>,
}

impl<'a> Backends<'a> {
    /// The project's own files as the knowledge base, and no semantic pipeline.
    pub fn files(project: &'a Project) -> Backends<'a> {
        Backends {
            kb: &project.kb.kb,
            semantic: None,
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
}

/// An observer that ignores everything.
#[derive(Debug, Default)]
pub struct Quiet;

impl RunObserver for Quiet {}

fn selected<'a, C>(
    cases: &'a [crate::banks::Located<C>],
    id: impl Fn(&C) -> &str,
    request: &RunRequest,
    extra: impl Fn(&C) -> bool,
) -> Vec<&'a C> {
    cases
        .iter()
        .map(|l| &l.case)
        .filter(|c| request.test.as_deref().is_none_or(|t| id(c) == t))
        .filter(|c| extra(c))
        .collect()
}

/// Runs what `request` asks for.
///
/// `backends.semantic` is the system under test of the semantic bank. When it is `None`, a semantic bank
/// selected implicitly (all banks) is skipped with a warning, and one asked for explicitly is a
/// usage error.
pub fn run(
    project: &Project,
    request: &RunRequest,
    backends: Backends<'_>,
    observer: &mut dyn RunObserver,
) -> Result<RunLog, HarnessError> {
    let semantic = backends.semantic;
    let started = Instant::now();
    let timestamp = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
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
        |c| &c.test_id,
        request,
        |c| topic_ok(&c.topics),
    );
    let state_cases = selected(&b.state, |c| &c.test_id, request, |_| true);
    let pattern_cases = selected(&b.pattern, |c| &c.test_id, request, |_| true);
    let always_cases = selected(&b.always, |c| &c.test_id, request, |_| true);

    if let Some(test) = &request.test {
        // Run only the bank that holds the case.
        let holder = [
            (BankType::Semantic, !semantic_cases.is_empty()),
            (BankType::State, !state_cases.is_empty()),
            (BankType::Pattern, !pattern_cases.is_empty()),
            (BankType::Always, !always_cases.is_empty()),
        ]
        .into_iter()
        .find(|(bank, found)| *found && banks.contains(bank));
        match holder {
            Some((bank, _)) => banks = vec![bank],
            None => {
                return Err(HarnessError::Usage(format!(
                    "no case with test_id `{test}` in the selected banks ({})",
                    banks.iter().map(|b| b.key()).collect::<Vec<_>>().join(", ")
                )));
            }
        }
    }
    if let Some(topic) = &request.topic
        && semantic_cases.is_empty()
    {
        return Err(HarnessError::Usage(format!(
            "no semantic case has topic `{topic}`"
        )));
    }
    if banks.contains(&BankType::Semantic) && semantic.is_none() {
        if explicit || request.test.is_some() {
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
    let selected_total: usize = banks
        .iter()
        .map(|bank| match bank {
            BankType::Semantic => semantic_cases.len(),
            BankType::State => state_cases.len(),
            BankType::Pattern => pattern_cases.len(),
            BankType::Always => always_cases.len(),
        })
        .sum();
    if selected_total == 0 {
        return Err(HarnessError::Usage(
            "no cases selected: the selected banks are empty".into(),
        ));
    }

    let mut results = BankResults::default();
    for bank in &banks {
        match bank {
            BankType::Semantic => {
                let Some(retriever) = semantic else { continue };
                observer.bank_started(*bank, semantic_cases.len());
                let mut out = Vec::with_capacity(semantic_cases.len());
                for case in &semantic_cases {
                    let resolved = project.expectations.resolve(case);
                    let r = runners::run_semantic_case(retriever, case, &resolved);
                    observer.case_finished(*bank, &r.test_id, r.score);
                    out.push(r);
                }
                observer.bank_finished(*bank);
                results.semantic = Some(SemanticResults::from_results(out));
            }
            BankType::State => {
                let matcher = StateMatcher::from_kb(backends.kb)
                    .map_err(|e| HarnessError::Usage(e.to_string()))?;
                observer.bank_started(*bank, state_cases.len());
                let out = state_cases
                    .iter()
                    .map(|case| {
                        let r = runners::run_state_case(&matcher, case);
                        observer.case_finished(*bank, &r.test_id, Some(r.score));
                        r
                    })
                    .collect();
                observer.bank_finished(*bank);
                results.state = Some(StateResults::from_results(out));
            }
            BankType::Pattern => {
                observer.bank_started(*bank, pattern_cases.len());
                let mut out = Vec::with_capacity(pattern_cases.len());
                if let Some(matcher) = &project.patterns {
                    for case in &pattern_cases {
                        let r = runners::run_pattern_case(matcher, case);
                        observer.case_finished(*bank, &r.test_id, Some(r.score));
                        out.push(r);
                    }
                }
                observer.bank_finished(*bank);
                results.pattern = Some(PatternResults::from_results(out));
            }
            BankType::Always => {
                observer.bank_started(*bank, always_cases.len());
                let mut out = Vec::with_capacity(always_cases.len());
                for case in &always_cases {
                    let r = runners::run_always_case(backends.kb, case)
                        .map_err(|e| HarnessError::Infrastructure(e.to_string()))?;
                    observer.case_finished(*bank, &r.test_id, Some(r.score));
                    out.push(r);
                }
                observer.bank_finished(*bank);
                results.always = Some(AlwaysResults::from_results(out));
            }
        }
    }

    let sources = (!project.banks.semantic.is_empty()).then(|| {
        project
            .expectations
            .summary(project.banks.semantic.iter().map(|l| &l.case))
    });
    let summary = results.summarize(&project.settings.weights, sources);
    Ok(RunLog {
        schema_version: SCHEMA_VERSION,
        assay_version: env!("CARGO_PKG_VERSION").to_owned(),
        run_id: uuid::Uuid::new_v4().to_string(),
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
        filters: RunFilters {
            banks,
            test: request.test.clone(),
            topic: request.topic.clone(),
        },
        summary,
        semantic: results.semantic,
        state: results.state,
        pattern: results.pattern,
        always: results.always,
        warnings,
    })
}

/// Whether a run passes the project's gate: not CRITICAL, health at least `min_health`,
/// combined score at least `min_score`.
pub fn gate_passed(log: &RunLog, settings: &crate::settings::ProjectSettings) -> bool {
    let s = &log.summary;
    s.health_status != assay_core::runlog::Health::Critical
        && s.health_status >= settings.min_health
        && s.combined_score >= settings.min_score
}
