//! The unified runner (000 §6.5): selects cases, runs the banks, aggregates into a RunLog.

use std::time::Instant;

use futures_util::StreamExt;

use assay_core::bank::BankType;
use assay_core::rundiff::KbFingerprint;
use assay_core::runlog::{
    AlwaysResults, BankResults, PatternResults, RunFilters, RunLog, SCHEMA_VERSION,
    SemanticCaseResult, SemanticResults, StateResults,
};

use assay_kb::KnowledgeBase;
use assay_retrieval::StateMatcher;

use crate::HarnessError;
use crate::journal::{Journal, JournalEntry, JournalHeader};
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
    /// The knowledge base the always and state banks read (the store after import, or a
    /// snapshot of it).
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
}

impl Default for RunOptions<'_> {
    fn default() -> Self {
        RunOptions {
            concurrency: 4,
            journal: None,
            repeat: 1,
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
                let mut out: Vec<Option<SemanticCaseResult>> = vec![None; semantic_cases.len()];
                let mut todo = Vec::new();
                for (i, case) in semantic_cases.iter().enumerate() {
                    match journal
                        .as_deref()
                        .and_then(|j| j.finished(*bank, &case.test_id))
                    {
                        Some(JournalEntry::Semantic(r)) => {
                            observer.case_finished(*bank, &r.test_id, r.score);
                            out[i] = Some(r.clone());
                        }
                        _ => todo.push(i),
                    }
                }
                let cases = &semantic_cases;
                let repeats = options.repeat.max(1);
                let mut running = futures_util::stream::iter(todo)
                    .map(|i| async move {
                        let case = cases[i];
                        let resolved = project.expectations.resolve(case);
                        (
                            i,
                            runners::run_semantic_repeated(retriever, case, &resolved, repeats)
                                .await,
                        )
                    })
                    .buffer_unordered(options.concurrency.max(1));
                while let Some((i, r)) = running.next().await {
                    if let Some(j) = journal.as_deref_mut() {
                        j.record(&JournalEntry::Semantic(r.clone()))?;
                    }
                    observer.case_finished(*bank, &r.test_id, r.score);
                    out[i] = Some(r);
                }
                observer.bank_finished(*bank);
                results.semantic = Some(
                    SemanticResults::from_results(out.into_iter().flatten().collect())
                        .with_repeats(repeats),
                );
            }
            BankType::State => {
                let matcher = StateMatcher::from_kb(backends.kb)
                    .map_err(|e| HarnessError::Usage(e.to_string()))?;
                let out = run_cases(
                    *bank,
                    &state_cases,
                    |c| &c.test_id,
                    journal.as_deref_mut(),
                    observer,
                    |case| Ok(JournalEntry::State(runners::run_state_case(&matcher, case))),
                )?;
                results.state = Some(StateResults::from_results(
                    out.into_iter().filter_map(|e| e.try_into().ok()).collect(),
                ));
            }
            BankType::Pattern => {
                let out = if let Some(matcher) = &project.patterns {
                    run_cases(
                        *bank,
                        &pattern_cases,
                        |c| &c.test_id,
                        journal.as_deref_mut(),
                        observer,
                        |case| {
                            Ok(JournalEntry::Pattern(runners::run_pattern_case(
                                matcher, case,
                            )))
                        },
                    )?
                } else {
                    observer.bank_started(*bank, 0);
                    observer.bank_finished(*bank);
                    Vec::new()
                };
                results.pattern = Some(PatternResults::from_results(
                    out.into_iter().filter_map(|e| e.try_into().ok()).collect(),
                ));
            }
            BankType::Always => {
                let out = run_cases(
                    *bank,
                    &always_cases,
                    |c| &c.test_id,
                    journal.as_deref_mut(),
                    observer,
                    |case| {
                        runners::run_always_case(backends.kb, case)
                            .map(JournalEntry::Always)
                            .map_err(|e| HarnessError::Infrastructure(e.to_string()))
                    },
                )?;
                results.always = Some(AlwaysResults::from_results(
                    out.into_iter().filter_map(|e| e.try_into().ok()).collect(),
                ));
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
        rate_limits: Vec::new(),
        settings: project.settings.recorded.clone(),
        kb: kb_fingerprint(backends.kb)?,
        baseline: None,
    })
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

/// Runs the cases of a deterministic bank, taking finished ones from the journal.
fn run_cases<C>(
    bank: BankType,
    cases: &[&C],
    id: impl Fn(&C) -> &str,
    journal: Option<&mut Journal>,
    observer: &mut dyn RunObserver,
    mut run_one: impl FnMut(&C) -> Result<JournalEntry, HarnessError>,
) -> Result<Vec<JournalEntry>, HarnessError> {
    observer.bank_started(bank, cases.len());
    let mut out = Vec::with_capacity(cases.len());
    // The cases run here, not taken from the journal: journaled together at the end (each
    // takes microseconds; a crash before then costs only their re-run).
    let mut fresh = Vec::new();
    for case in cases {
        let entry = if let Some(done) = journal.as_deref().and_then(|j| j.finished(bank, id(case)))
        {
            done.clone()
        } else {
            fresh.push(out.len());
            run_one(case)?
        };
        observer.case_finished(bank, entry.test_id(), entry.score());
        out.push(entry);
    }
    if let Some(j) = journal {
        j.record_all(fresh.iter().map(|&i| &out[i]))?;
    }
    observer.bank_finished(bank);
    Ok(out)
}

/// `banks=…;test=…;topic=…`: a request as the journal header records it.
pub fn request_key(request: &RunRequest) -> String {
    let mut banks: Vec<&str> = request.banks.iter().map(|b| b.key()).collect();
    banks.sort_unstable();
    format!(
        "banks={};test={};topic={}",
        if banks.is_empty() {
            "all".to_owned()
        } else {
            banks.join(",")
        },
        request.test.as_deref().unwrap_or("*"),
        request.topic.as_deref().unwrap_or("*"),
    )
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
    let digest = hash.finalize();
    let short = digest[..8].iter().fold(String::new(), |mut out, b| {
        use std::fmt::Write as _;
        let _ = write!(out, "{b:02x}");
        out
    });
    let semantic = backends.semantic.map_or_else(
        || "no semantic retriever".to_owned(),
        SemanticRetriever::describe,
    );
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
pub fn gate_passed(log: &RunLog, settings: &crate::settings::ProjectSettings) -> bool {
    let s = &log.summary;
    s.health_status != assay_core::runlog::Health::Critical
        && s.health_status >= settings.min_health
        && s.combined_score >= settings.min_score
}
