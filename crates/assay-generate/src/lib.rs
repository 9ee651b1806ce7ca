//! Test generation and review: draft cases made from the knowledge base and their review
//! into the banks ([`review`]: list, accept, edit, reject, confirm, retire, coverage).
//!
//! Draft cases from the knowledge base (`assay generate`; docs/generate.md).
//!
//! [`generate`] is the whole command: it resolves the request against `[generate]`, selects
//! the entities (`--entities`, or those whose content changed since a saved run), estimates
//! the calls and their cost before any call (and refuses a `--budget` below the estimate),
//! then makes the drafts of each bank asked for:
//!
//! - **semantic** ([`semantic`]): messages a model writes for each SITUATION entity and for
//!   related pairs, checked, deduplicated, run through the pipeline (findings), with the
//!   calibrator's secondaries;
//! - **state** ([`state`]): boundary cases of each STATE handler's conditions, no model;
//! - **pattern** ([`pattern`]): messages meant to fire each rule and look-alikes, run through
//!   the matcher (findings).
//!
//! Every model call goes through [`caller::Caller`]: the budget before it, the provider-call
//! wrapper (cache, limits, a per-call timeout), and the generation's [`journal`], from which
//! `--resume` finishes a killed generation without paying for a call twice. The drafts are
//! written, one file per bank, to `test_banks/drafts/<bank>/<generation>.json` (never over an
//! existing file).
#![deny(missing_docs)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod caller;
pub mod journal;
pub mod language;
pub mod pattern;
pub mod prompts;
pub mod review;
pub mod semantic;
pub mod state;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use assay_core::bank::{BankType, Case};
use assay_core::draft::{DraftBank, Finding};
use assay_core::entity::{Entity, LoadMode};
use futures_util::StreamExt as _;
use serde::Serialize;

pub use assay_project::HarnessError;
use assay_project::drafts;
use assay_project::engine::{self, ProviderCalls};
use assay_project::project::Project;
use caller::{Call, Caller, Outcome};

/// How many items of a list the outcome keeps (the counts cover them all).
pub const LISTED: usize = 20;

/// What `assay generate` was asked, before `[generate]` fills the gaps.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GenerateRequest {
    /// The banks (empty: all three).
    pub banks: Vec<BankType>,
    /// Only these entities.
    pub entities: Option<Vec<String>>,
    /// Only the entities changed since this saved run (id, file, `latest`, `accepted`).
    pub changed_since: Option<String>,
    /// Drafts per entity (and per rule each way).
    pub per_entity: Option<u32>,
    /// The model (`vendor/model`).
    pub model: Option<String>,
    /// The most USD the generation may cost.
    pub budget: Option<f64>,
    /// The language of the messages.
    pub language: Option<String>,
    /// Finish the newest interrupted generation.
    pub resume: bool,
    /// Estimate and list, call nothing, write nothing.
    pub dry_run: bool,
    /// Calls in flight at once.
    pub concurrency: Option<usize>,
}

/// The calls and cost a generation will make at most: every call answered at its token
/// limit, none from the cache or the journal, one calibrator call per message asked for.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Estimate {
    /// Calls that write messages.
    pub generation_calls: usize,
    /// Calibrator calls (one per semantic message, at most).
    pub calibrator_calls: usize,
    /// Input tokens (4 characters a token).
    pub input_tokens: u64,
    /// Output tokens (each reply at its limit).
    pub output_tokens: u64,
    /// USD, when the model's price is known.
    pub cost_usd: Option<f64>,
}

impl Estimate {
    /// All calls.
    pub fn calls(&self) -> usize {
        self.generation_calls + self.calibrator_calls
    }
}

/// A message that was not written as a draft, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rejection {
    /// The entity (or rule) it was for.
    pub source: String,
    /// `invalid_reply`, `empty` or `off_language`.
    pub reason: String,
    /// The details.
    pub detail: String,
}

/// A finding in the outcome's list.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FindingLine {
    /// The draft.
    pub test_id: String,
    /// The finding.
    #[serde(flatten)]
    pub finding: Finding,
}

/// What one bank's generation came to.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BankOutcome {
    /// `semantic`, `state` or `pattern`.
    pub bank: String,
    /// The draft file written (none for a dry run or no drafts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
    /// Drafts written.
    pub drafts: usize,
    /// Drafts per entity (or rule).
    pub per_entity: BTreeMap<String, usize>,
    /// Near-duplicates dropped (state: cases already in a bank or a draft).
    pub duplicates: usize,
    /// The first duplicates, in words.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub duplicate_list: Vec<String>,
    /// Rejected replies or messages, by reason.
    pub rejected: BTreeMap<String, usize>,
    /// The first rejections.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rejections: Vec<Rejection>,
    /// Findings, by kind.
    pub findings: BTreeMap<String, usize>,
    /// The first findings.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub finding_list: Vec<FindingLine>,
    /// Calls that failed (provider errors, timeouts).
    pub errors: usize,
    /// The first errors.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub error_list: Vec<String>,
}

impl BankOutcome {
    /// A message-writing call's reply, parsed as `T`: an unusable reply, one that is not a
    /// `T`, or one that `is_empty` says holds no message is rejected with its reason (a
    /// provider error is counted as an error), and gives `None`.
    fn parsed<T: serde::de::DeserializeOwned>(
        &mut self,
        who: &str,
        reply: &Outcome,
        is_empty: impl Fn(&T) -> bool,
    ) -> Option<T> {
        let value = match reply {
            Outcome::Valid(v) => v,
            Outcome::Invalid(why) => {
                self.reject(who, "invalid_reply", why);
                return None;
            }
            Outcome::Error(e) => {
                self.error(who, e);
                return None;
            }
            Outcome::OverBudget => return None,
        };
        match serde_json::from_value::<T>(value.clone()) {
            Ok(parsed) if is_empty(&parsed) => {
                self.reject(who, "empty", "the reply holds no messages");
                None
            }
            Ok(parsed) => Some(parsed),
            Err(e) => {
                self.reject(who, "invalid_reply", &e.to_string());
                None
            }
        }
    }

    fn new(bank: &str) -> BankOutcome {
        BankOutcome {
            bank: bank.to_owned(),
            ..BankOutcome::default()
        }
    }

    fn reject(&mut self, source: &str, reason: &str, detail: &str) {
        *self.rejected.entry(reason.to_owned()).or_default() += 1;
        if self.rejections.len() < LISTED {
            self.rejections.push(Rejection {
                source: source.to_owned(),
                reason: reason.to_owned(),
                detail: detail.to_owned(),
            });
        }
    }

    fn error(&mut self, source: &str, error: &str) {
        self.errors += 1;
        if self.error_list.len() < LISTED {
            self.error_list.push(format!("{source}: {error}"));
        }
    }

    fn finding(&mut self, test_id: &str, f: &Finding) {
        *self.findings.entry(f.kind.as_str().to_owned()).or_default() += 1;
        if self.finding_list.len() < LISTED {
            self.finding_list.push(FindingLine {
                test_id: test_id.to_owned(),
                finding: f.clone(),
            });
        }
    }
}

/// The calls of the generation.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CallCounts {
    /// Answered by the model in this process.
    pub made: usize,
    /// Chat requests sent (corrective turns included).
    pub requests: usize,
    /// Answered from the journal of an earlier process (`--resume`).
    pub replayed: usize,
    /// Failed.
    pub errors: usize,
    /// What this process's calls cost (USD), when the price is known.
    pub cost_usd: Option<f64>,
}

/// The result of [`generate`].
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GenerateOutcome {
    /// The generation's id.
    pub generation: String,
    /// When it started.
    pub generated_at: String,
    /// Nothing was called or written.
    pub dry_run: bool,
    /// It finished an interrupted generation.
    pub resumed: bool,
    /// The resolved request.
    pub request: BTreeMap<String, String>,
    /// The estimate made before any call.
    pub estimate: Estimate,
    /// Per bank, in the order asked.
    pub banks: Vec<BankOutcome>,
    /// The calls.
    pub calls: CallCounts,
    /// Set when the budget stopped calls: what was made is written; `--resume` with a larger
    /// budget finishes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// The journal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub journal: Option<PathBuf>,
}

impl GenerateOutcome {
    /// Calls that failed, in every bank.
    pub fn errors(&self) -> usize {
        self.calls.errors + self.banks.iter().map(|b| b.errors).sum::<usize>()
    }
}

/// What the caller shows while a generation runs.
pub struct Observer<'a> {
    /// The estimate, before any call.
    pub estimate: &'a (dyn Fn(&Estimate) + Sync),
    /// After each call: (calls finished, calls planned, USD so far).
    pub progress: &'a (dyn Fn(usize, usize, f64) + Sync),
}

/// What every bank's generation shares.
pub struct Context<'a> {
    /// The generation id.
    pub generation: String,
    /// When it started.
    pub generated_at: String,
    /// The model's name.
    pub model: String,
    /// The language.
    pub language: String,
    /// Per entity.
    pub per_entity: u32,
    /// Calls in flight.
    pub concurrency: usize,
    /// The near-duplicate threshold.
    pub duplicate_threshold: f64,
    /// Every entity's current version.
    pub versions: &'a BTreeMap<String, u32>,
}

/// Tokens of a text, roughly (4 characters a token).
pub fn tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}

/// One message-writing call per user turn, all under `system` and the schema `name`, without a
/// check beyond the schema, answered at `concurrency` and returned in order.
pub async fn ask_each(
    caller: &Caller<'_>,
    concurrency: usize,
    (name, schema): (&str, serde_json::Value),
    system: &str,
    users: &[&str],
) -> Result<Vec<(Outcome, String)>, HarnessError> {
    let schema = assay_providers::SchemaCheck::new(name, schema)
        .map_err(|e| HarnessError::Infrastructure(e.to_string()))?;
    let no_check = |_: &serde_json::Value| Ok(());
    let calls: Vec<Call<'_>> = users
        .iter()
        .map(|user| Call {
            system,
            user,
            schema: &schema,
            check: &no_check,
            input_tokens: tokens(system) + tokens(user),
            max_tokens: prompts::MAX_REPLY_TOKENS,
        })
        .collect();
    run_all(caller, &calls, concurrency).await
}

/// Makes `calls`, `concurrency` at a time, and returns their outcomes in order.
pub async fn run_all(
    caller: &Caller<'_>,
    calls: &[Call<'_>],
    concurrency: usize,
) -> Result<Vec<(Outcome, String)>, HarnessError> {
    let mut results: Vec<Option<(Outcome, String)>> = vec![None; calls.len()];
    let mut stream = futures_util::stream::iter(calls.iter().enumerate())
        .map(|(i, call)| async move { (i, caller.ask(call).await) })
        .buffer_unordered(concurrency.max(1));
    while let Some((i, result)) = stream.next().await {
        results[i] = Some(result?);
    }
    Ok(results
        .into_iter()
        .map(|r| r.unwrap_or((Outcome::OverBudget, String::new())))
        .collect())
}

/// The banks, parsed from `semantic,state,pattern`.
pub fn parse_banks(text: &str) -> Result<Vec<BankType>, HarnessError> {
    let mut out = Vec::new();
    for name in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let bank = drafts::DRAFT_BANKS
            .into_iter()
            .find(|b| b.key() == name.to_lowercase())
            .ok_or_else(|| {
                HarnessError::Usage(format!(
                    "--banks: unknown bank `{name}` (expected semantic, state or pattern)"
                ))
            })?;
        if !out.contains(&bank) {
            out.push(bank);
        }
    }
    if out.is_empty() {
        return Err(HarnessError::Usage(
            "--banks: name at least one of semantic, state, pattern".into(),
        ));
    }
    Ok(out)
}

fn banks_text(banks: &[BankType]) -> String {
    banks.iter().map(|b| b.key()).collect::<Vec<_>>().join(",")
}

/// The entities whose content differs from the saved run `spec`'s (or that it did not have).
fn changed_since(
    project: &Project,
    kb: &dyn assay_kb::KnowledgeBase,
    spec: &str,
) -> Result<Vec<String>, HarnessError> {
    let reference = assay_run::freshness::load_reference(project, spec)?;
    let now = assay_run::run::kb_fingerprint(kb)?;
    let changed = assay_run::freshness::changed_entities(&reference, spec, &now, kb)?;
    Ok(changed.entities.into_iter().collect())
}

/// A generation id not used by a journal or a draft file: `gen-<time>`, else with `-2`, `-3`…
fn free_generation(project: &Project, now: chrono::DateTime<chrono::Utc>) -> String {
    let base = drafts::new_generation_id(now);
    let banks = &project.settings.banks_dir;
    let taken = |id: &str| {
        journal::journal_path(&project.settings, id).exists()
            || drafts::DRAFT_BANKS.iter().any(|b| {
                drafts::drafts_dir(banks, *b)
                    .join(format!("{id}.json"))
                    .exists()
            })
    };
    if !taken(&base) {
        return base;
    }
    (2..=u32::MAX)
        .map(|i| format!("{base}-{i}"))
        .find(|id| !taken(id))
        .unwrap_or(base)
}

/// Whether a draft of a resumed generation's file is still what the interrupted process wrote:
/// pending, not reviewed and not edited (an edit leaves its note). Such a draft is replaced by
/// the one the resumed process makes (which may hold what a failed call left out); any other
/// is a person's work and is kept as it is.
fn untouched<C>(d: &assay_core::draft::Draft<C>) -> bool {
    d.status == assay_core::draft::DraftStatus::Pending
        && d.reviewed_by.is_none()
        && d.note
            .as_deref()
            .is_none_or(|n| n.starts_with(semantic::SECONDARIES_NOT_DRAFTED))
}

/// The drafts of a resumed generation's file merged with those the resumed process made: in
/// the order an uninterrupted generation gives them, a draft a person has reviewed or edited
/// since kept as it is, and a draft of the file the resumed process did not make kept after
/// them (nothing a person may have looked at is dropped).
fn merge_resumed<C: Case>(
    existing: Vec<assay_core::draft::Draft<C>>,
    made: Vec<assay_core::draft::Draft<C>>,
) -> Vec<assay_core::draft::Draft<C>> {
    let mut existing: Vec<Option<assay_core::draft::Draft<C>>> =
        existing.into_iter().map(Some).collect();
    let mut out = Vec::with_capacity(made.len().max(existing.len()));
    for draft in made {
        let earlier = existing.iter_mut().find(|e| {
            e.as_ref()
                .is_some_and(|e| e.case.test_id() == draft.case.test_id())
        });
        match earlier.and_then(Option::take) {
            Some(e) if !untouched(&e) => out.push(e),
            _ => out.push(draft),
        }
    }
    out.extend(existing.into_iter().flatten());
    out
}

fn write_bank<C: Serialize + serde::de::DeserializeOwned + Case>(
    project: &Project,
    bank: BankType,
    generation: &str,
    created: &str,
    request: &BTreeMap<String, String>,
    drafts: Vec<assay_core::draft::Draft<C>>,
    resumed: bool,
) -> Result<Option<PathBuf>, HarnessError> {
    let path =
        drafts::drafts_dir(&project.settings.banks_dir, bank).join(format!("{generation}.json"));
    let drafts = if path.exists() && resumed {
        // The interrupted process of this generation wrote it (the drafts its answered calls
        // gave, perhaps reviewed since): completed with what the resumed calls gave.
        let earlier: DraftBank<C> = drafts::read_draft_bank(&path, bank)?;
        merge_resumed(earlier.drafts, drafts)
    } else if path.exists() {
        // Nothing a person (or an earlier generation) wrote is overwritten.
        return Err(HarnessError::Usage(format!(
            "{}: a draft file of this generation exists already; nothing was overwritten",
            path.display()
        )));
    } else {
        drafts
    };
    if drafts.is_empty() {
        return Ok(None);
    }
    let file = DraftBank {
        schema: None,
        bank_type: bank,
        generation: generation.to_owned(),
        created: created.to_owned(),
        request: request.clone(),
        drafts,
    };
    drafts::write_draft_bank(&path, &file)?;
    Ok(Some(path))
}

/// Generates drafts as `request` says (see the module docs).
///
/// The future is not `Send` (the pipeline's store is not).
pub async fn generate(
    project: &Project,
    request: &GenerateRequest,
    env: &dyn Fn(&str) -> Option<String>,
    now: chrono::DateTime<chrono::Utc>,
    observer: &Observer<'_>,
) -> Result<GenerateOutcome, HarnessError> {
    let settings = &project.settings;
    let g = &settings.generate;
    // 1. The request: a resumed generation asks exactly what the interrupted one asked.
    let resumed = if request.resume {
        let path = journal::latest_unfinished(settings)?.ok_or_else(|| {
            HarnessError::Usage(
                "--resume: no interrupted generation to finish (every journal in .assay/generate/ is finished)".into(),
            )
        })?;
        Some(journal::read(&path)?.header)
    } else {
        None
    };
    let asked = |key: &str| resumed.as_ref().and_then(|h| h.request.get(key).cloned());
    if let Some(h) = &resumed {
        // A resume asks exactly what the interrupted generation asked: a flag that says
        // otherwise is refused, not silently ignored (--budget and --concurrency may change).
        let given = [
            (
                "--banks",
                "banks",
                (!request.banks.is_empty()).then(|| banks_text(&request.banks)),
            ),
            (
                "--per-entity",
                "per_entity",
                request.per_entity.map(|n| n.to_string()),
            ),
            ("--language", "language", request.language.clone()),
            ("--model", "model", request.model.clone()),
            (
                "--entities",
                "entities",
                request.entities.as_ref().map(|e| e.join(",")),
            ),
            (
                "--changed-since",
                "changed_since",
                request.changed_since.clone(),
            ),
        ];
        let differs: Vec<String> = given
            .into_iter()
            .filter_map(|(flag, key, value)| {
                let value = value?;
                let was = h.request.get(key).map_or("(not given)", String::as_str);
                (was != value).then(|| format!("{flag} {value} (it asked {was})"))
            })
            .collect();
        if !differs.is_empty() {
            return Err(HarnessError::Usage(format!(
                "--resume finishes generation {} as it was asked; {} differ{}: leave them out to resume, or start a new generation without --resume",
                h.generation,
                differs.join(", "),
                if differs.len() == 1 { "s" } else { "" }
            )));
        }
    }
    let banks = match asked("banks") {
        Some(b) => parse_banks(&b)?,
        None if request.banks.is_empty() => drafts::DRAFT_BANKS.to_vec(),
        None => request.banks.clone(),
    };
    let per_entity = match asked("per_entity") {
        Some(n) => n.parse().unwrap_or(g.per_entity),
        None => request.per_entity.unwrap_or(g.per_entity),
    };
    if !(1..=100).contains(&per_entity) {
        return Err(HarnessError::Usage(
            "--per-entity: must be between 1 and 100".into(),
        ));
    }
    let language = asked("language")
        .or_else(|| request.language.clone())
        .unwrap_or_else(|| g.language.clone());
    let model_name = asked("model")
        .or_else(|| request.model.clone())
        .or_else(|| g.model.clone())
        .unwrap_or_else(|| settings.calibration.model.clone());
    let model_source = if request.model.is_some() {
        "--model"
    } else if g.model.is_some() {
        "assay.toml [generate] model"
    } else {
        "assay.toml [calibration] model"
    };
    let concurrency = request.concurrency.unwrap_or(g.concurrency).max(1);
    if let Some(b) = request.budget
        && !(b.is_finite() && b > 0.0)
    {
        return Err(HarnessError::Usage(
            "--budget: must be more than 0 USD".into(),
        ));
    }

    // 2. The knowledge base and the entities.
    let store = engine::open_store_with(settings, env)?;
    engine::sync_kb(&store, project)?;
    let kb = engine::snapshot(&*store)?;
    // A database store's conditions and audiences are checked as the kb/ files' were by
    // Project::load; the boundary states are made of the fields' types.
    for w in project.check_typed_state(&kb)? {
        tracing::warn!("{w}");
    }
    let state_schema =
        settings
            .state
            .clone()
            .with_audiences(assay_project::typed_state::audiences(
                &assay_kb::KnowledgeBase::list(&kb, &assay_kb::EntityFilter::default())?,
            ));
    let mut all: Vec<Entity> = assay_kb::KnowledgeBase::list(
        &kb,
        &assay_kb::EntityFilter {
            active: Some(true),
            ..assay_kb::EntityFilter::default()
        },
    )?;
    all.sort_by(|a, b| a.entity_id.cmp(&b.entity_id));
    let mut versions = BTreeMap::new();
    for e in &all {
        if let Some(stored) = store.get_stored(&e.entity_id)? {
            versions.insert(e.entity_id.clone(), stored.version);
        }
    }
    let only: Option<Vec<String>> =
        match (asked("entities"), &request.entities, &request.changed_since) {
            (Some(ids), _, _) => Some(
                ids.split(',')
                    .map(str::to_owned)
                    .filter(|s| !s.is_empty())
                    .collect(),
            ),
            (None, Some(ids), _) => {
                for id in ids {
                    if !versions.contains_key(id) {
                        let hint =
                            assay_core::text::closest(id, all.iter().map(|e| e.entity_id.as_str()))
                                .map(|c| format!(" (did you mean `{c}`?)"))
                                .unwrap_or_default();
                        return Err(HarnessError::Usage(format!(
                            "--entities: `{id}` is not an active entity of the knowledge base{hint}"
                        )));
                    }
                }
                Some(ids.clone())
            }
            (None, None, Some(spec)) => Some(changed_since(project, &kb, spec)?),
            (None, None, None) => None,
        };
    let wanted = |id: &str| only.as_ref().is_none_or(|o| o.iter().any(|x| x == id));
    let situations: Vec<&Entity> = all
        .iter()
        .filter(|e| e.load_mode == LoadMode::Situation && wanted(&e.entity_id))
        .collect();
    let by_id: HashMap<&str, &Entity> = all.iter().map(|e| (e.entity_id.as_str(), e)).collect();
    let rules = match (&project.rules, banks.contains(&BankType::Pattern)) {
        (Some(r), true) => pattern::rules(r, per_entity, only.as_deref(), &by_id),
        _ => Vec::new(),
    };

    // 3. The generation's identity and its journal.
    let (generation, generated_at) = match &resumed {
        Some(h) => (h.generation.clone(), h.generated_at.clone()),
        None => (
            free_generation(project, now),
            now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        ),
    };
    let mut asked_for = BTreeMap::from([
        ("banks".to_owned(), banks_text(&banks)),
        ("per_entity".to_owned(), per_entity.to_string()),
        ("language".to_owned(), language.clone()),
        ("model".to_owned(), model_name.clone()),
    ]);
    if let Some(o) = &only {
        asked_for.insert("entities".to_owned(), o.join(","));
    }
    if let Some(spec) = &request.changed_since {
        asked_for.insert("changed_since".to_owned(), spec.clone());
    }

    // 4. The estimate, before any call.
    let needs_model =
        (banks.contains(&BankType::Semantic) && !situations.is_empty()) || !rules.is_empty();
    let semantic_jobs = if banks.contains(&BankType::Semantic) {
        semantic::jobs(&situations, per_entity)
    } else {
        Vec::new()
    };
    let calls = ProviderCalls::open(&tighter(settings), None, env, needs_model)?;
    let price = calls.price(&model_name);
    let mut estimate = Estimate::default();
    {
        let sem_system = prompts::semantic_system(&language);
        let pat_system = prompts::pattern_system(&language);
        let calib_system = assay_run::calibrate::system_prompt(&all);
        for job in &semantic_jobs {
            estimate.generation_calls += 1;
            estimate.input_tokens += tokens(&sem_system) + tokens(&job.user);
            estimate.output_tokens += u64::from(prompts::MAX_REPLY_TOKENS);
            for _ in 0..job.n {
                estimate.calibrator_calls += 1;
                estimate.input_tokens += tokens(&calib_system) + 400;
                estimate.output_tokens += u64::from(assay_run::calibrate::MAX_REPLY_TOKENS);
            }
        }
        for rule in &rules {
            estimate.generation_calls += 1;
            estimate.input_tokens += tokens(&pat_system) + tokens(&rule.user);
            estimate.output_tokens += u64::from(prompts::MAX_REPLY_TOKENS);
        }
        estimate.cost_usd = if estimate.calls() == 0 {
            Some(0.0)
        } else {
            price.map(|p| {
                (estimate.input_tokens as f64 * p.input + estimate.output_tokens as f64 * p.output)
                    / 1e6
            })
        };
    }
    (observer.estimate)(&estimate);
    if let Some(budget) = request.budget
        && estimate.calls() > 0
    {
        match estimate.cost_usd {
            None => {
                return Err(HarnessError::Usage(format!(
                    "--budget: the cost cannot be enforced: {model_name} has no known price (declare it in assay.toml, e.g. [providers.prices] \"{model_name}\" = {{ input = 0.5, output = 1.5 }} USD per million tokens)"
                )));
            }
            Some(cost) if cost > budget => {
                return Err(HarnessError::Usage(format!(
                    "--budget: the estimate is ${cost:.4} for {} calls, above the budget of ${budget:.4}; nothing was called (raise --budget, or lower --per-entity or the entities)",
                    estimate.calls()
                )));
            }
            Some(_) => {}
        }
    }
    let mut outcome = GenerateOutcome {
        generation: generation.clone(),
        generated_at: generated_at.clone(),
        dry_run: request.dry_run,
        resumed: resumed.is_some(),
        request: asked_for.clone(),
        estimate: estimate.clone(),
        ..GenerateOutcome::default()
    };
    if request.dry_run {
        for bank in &banks {
            let mut b = BankOutcome::new(bank.key());
            match bank {
                BankType::Semantic => {
                    for job in &semantic_jobs {
                        *b.per_entity.entry(job.entities.join("+")).or_default() += job.n as usize;
                    }
                }
                BankType::Pattern => {
                    for rule in &rules {
                        b.per_entity.insert(
                            format!("{} rule {}", rule.kind, rule.index + 1),
                            2 * per_entity as usize,
                        );
                    }
                }
                _ => {
                    let cases = state::boundary_cases(
                        &state_schema,
                        &all,
                        &versions,
                        &generation,
                        &generated_at,
                    );
                    for c in cases.iter().filter(|c| {
                        c.provenance
                            .as_ref()
                            .and_then(|p| p.entity_id.as_deref())
                            .is_some_and(wanted)
                    }) {
                        let id = c
                            .provenance
                            .as_ref()
                            .and_then(|p| p.entity_id.clone())
                            .unwrap_or_default();
                        *b.per_entity.entry(id).or_default() += 1;
                    }
                }
            }
            outcome.banks.push(b);
        }
        return Ok(outcome);
    }

    // 5. The model, the journal, the caller.
    let chat = if needs_model {
        Some(calls.chat(
            "generator",
            engine::build_chat_model(&tighter(settings), &model_name, model_source, env)?,
        ))
    } else {
        None
    };
    let journal = match &resumed {
        Some(h) => journal::Journal::resume(&journal::journal_path(settings, &h.generation))?,
        None => journal::Journal::create(
            &journal::journal_path(settings, &generation),
            journal::Header {
                generation: generation.clone(),
                generated_at: generated_at.clone(),
                request: asked_for.clone(),
            },
        )?,
    };
    let spent_before = journal.spent();
    let planned = estimate.calls();
    let progress = |done: usize, cost: f64| (observer.progress)(done, planned, cost);
    let caller = Caller::new(
        chat.as_deref(),
        Some(&journal),
        price,
        request.budget,
        spent_before,
        Some(&progress),
    );
    let cx = Context {
        generation: generation.clone(),
        generated_at: generated_at.clone(),
        model: model_name.clone(),
        language: language.clone(),
        per_entity,
        concurrency,
        duplicate_threshold: g.duplicate_threshold,
        versions: &versions,
    };
    // The drafts of other generations: a resumed generation's own files (what its interrupted
    // process wrote) are neither duplicates of its drafts nor ids they may not take.
    let mut existing_drafts = drafts::load_drafts(&settings.banks_dir)?;
    // Its drafts accepted since are the same cases in a bank: not taken, not duplicates.
    let own: HashSet<String> = existing_drafts
        .semantic
        .iter()
        .filter(|l| l.file.generation == generation)
        .flat_map(|l| l.file.drafts.iter().map(|d| d.case.test_id.clone()))
        .chain(
            existing_drafts
                .state
                .iter()
                .filter(|l| l.file.generation == generation)
                .flat_map(|l| l.file.drafts.iter().map(|d| d.case.test_id.clone())),
        )
        .chain(
            existing_drafts
                .pattern
                .iter()
                .filter(|l| l.file.generation == generation)
                .flat_map(|l| l.file.drafts.iter().map(|d| d.case.test_id.clone())),
        )
        .collect();
    existing_drafts
        .semantic
        .retain(|l| l.file.generation != generation);
    existing_drafts
        .state
        .retain(|l| l.file.generation != generation);
    existing_drafts
        .pattern
        .retain(|l| l.file.generation != generation);
    let mut taken_ids: HashSet<String> = project
        .banks
        .semantic
        .iter()
        .map(|l| l.case.test_id.clone())
        .chain(project.banks.state.iter().map(|l| l.case.test_id.clone()))
        .chain(project.banks.pattern.iter().map(|l| l.case.test_id.clone()))
        .filter(|id| !own.contains(id))
        .collect();
    for l in &existing_drafts.semantic {
        taken_ids.extend(l.file.drafts.iter().map(|d| d.case.test_id.clone()));
    }
    for l in &existing_drafts.state {
        taken_ids.extend(l.file.drafts.iter().map(|d| d.case.test_id.clone()));
    }
    for l in &existing_drafts.pattern {
        taken_ids.extend(l.file.drafts.iter().map(|d| d.case.test_id.clone()));
    }

    let mut written = Vec::new();
    for bank in &banks {
        let b = match bank {
            BankType::Semantic => {
                if situations.is_empty() {
                    BankOutcome::new("semantic")
                } else {
                    let choice = engine::choose_embedder(settings, None, env)?;
                    let embedder: Arc<dyn assay_providers::Embedder> =
                        calls.embedder(engine::build_embedder(&choice)?);
                    let config = engine::retrieval_config(settings, &choice);
                    let (pipeline, _, _) = engine::prepare_search_pipeline(
                        &store,
                        &kb,
                        project,
                        embedder.as_ref(),
                        config,
                    )
                    .await?;
                    let mut existing: Vec<String> = project
                        .banks
                        .semantic
                        .iter()
                        .filter(|l| !own.contains(&l.case.test_id))
                        .map(|l| l.case.prompt.clone())
                        .collect();
                    for l in &existing_drafts.semantic {
                        existing.extend(l.file.drafts.iter().map(|d| d.case.prompt.clone()));
                    }
                    let inputs = semantic::Inputs {
                        entities: situations.clone(),
                        all: &all,
                        pipeline: &pipeline,
                        embedder: embedder.as_ref(),
                        existing,
                    };
                    let (mut drafts, mut b) = semantic::generate(&cx, &caller, &inputs).await?;
                    drafts.retain(|d| !taken_ids.contains(&d.case.test_id));
                    // The calibrator's secondaries are named too: their versions are recorded.
                    for d in &mut drafts {
                        assay_project::provenance::record_named(&mut d.case, &versions);
                    }
                    b.drafts = drafts.len();
                    taken_ids.extend(drafts.iter().map(|d| d.case.test_id.clone()));
                    b.file = write_bank(
                        project,
                        BankType::Semantic,
                        &generation,
                        &generated_at,
                        &asked_for,
                        drafts,
                        resumed.is_some(),
                    )?;
                    b
                }
            }
            BankType::State => {
                let mut b = BankOutcome::new("state");
                let cases = state::boundary_cases(
                    &state_schema,
                    &all,
                    &versions,
                    &generation,
                    &generated_at,
                );
                let mut drafts = Vec::new();
                for case in cases {
                    let handler = case
                        .provenance
                        .as_ref()
                        .and_then(|p| p.entity_id.clone())
                        .unwrap_or_default();
                    if !wanted(&handler) {
                        continue;
                    }
                    if !taken_ids.insert(case.test_id.clone()) {
                        // The same boundary state is a case or a draft already.
                        b.duplicates += 1;
                        continue;
                    }
                    *b.per_entity.entry(handler).or_default() += 1;
                    let mut case = case;
                    assay_project::provenance::record_named(&mut case, &versions);
                    drafts.push(assay_core::draft::Draft {
                        case,
                        status: assay_core::draft::DraftStatus::default(),
                        finding: None,
                        reviewed_by: None,
                        reviewed_at: None,
                        note: None,
                        accepted_into: None,
                    });
                }
                b.drafts = drafts.len();
                b.file = write_bank(
                    project,
                    BankType::State,
                    &generation,
                    &generated_at,
                    &asked_for,
                    drafts,
                    resumed.is_some(),
                )?;
                b
            }
            _ => match &project.patterns {
                Some(matcher) if !rules.is_empty() => {
                    let (mut drafts, mut b) =
                        pattern::generate(&cx, &caller, &rules, matcher).await?;
                    drafts.retain(|d| !taken_ids.contains(&d.case.test_id));
                    for d in &mut drafts {
                        assay_project::provenance::record_named(&mut d.case, &versions);
                    }
                    b.drafts = drafts.len();
                    taken_ids.extend(drafts.iter().map(|d| d.case.test_id.clone()));
                    b.file = write_bank(
                        project,
                        BankType::Pattern,
                        &generation,
                        &generated_at,
                        &asked_for,
                        drafts,
                        resumed.is_some(),
                    )?;
                    b
                }
                _ => BankOutcome::new("pattern"),
            },
        };
        if let Some(f) = &b.file {
            written.push(
                f.strip_prefix(&settings.root)
                    .unwrap_or(f)
                    .display()
                    .to_string(),
            );
        }
        outcome.banks.push(b);
    }
    use std::sync::atomic::Ordering;
    outcome.calls = CallCounts {
        made: caller.made.load(Ordering::SeqCst),
        requests: caller.requests.load(Ordering::SeqCst),
        replayed: caller.replayed.load(Ordering::SeqCst),
        errors: caller.errors.load(Ordering::SeqCst),
        cost_usd: caller.spent(),
    };
    if caller.budget_hit.load(Ordering::SeqCst) {
        outcome.stopped = Some(format!(
            "the budget of ${:.4} was reached; calls after it were not made",
            request.budget.unwrap_or_default()
        ));
    }
    outcome.journal = Some(journal.path().to_owned());
    // A generation with failed or unmade calls stays open for --resume.
    if outcome.stopped.is_none() && outcome.errors() == 0 {
        journal.finish(written)?;
    }
    let usage = calls.usage_report();
    if !usage.is_empty() {
        tracing::info!("{}", usage.trim_end());
    }
    Ok(outcome)
}

/// The settings with `[generate] timeout_seconds` as the bound of each call: the HTTP timeout
/// of one request and the longest wait of a call, retries included.
fn tighter(
    settings: &assay_project::settings::ProjectSettings,
) -> assay_project::settings::ProjectSettings {
    let mut s = settings.clone();
    let t = settings.generate.timeout_seconds;
    s.providers.timeout_seconds = s.providers.timeout_seconds.min(t);
    s.providers.max_wait_seconds = s.providers.max_wait_seconds.min(t);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(toml: &str) -> Result<assay_project::settings::ProjectSettings, String> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("assay.toml"), toml).unwrap();
        assay_project::settings::ProjectSettings::load(dir.path()).map_err(|e| e.to_string())
    }

    #[test]
    fn the_generate_table_has_defaults_and_strict_errors() {
        let s = settings("").unwrap();
        assert_eq!(s.generate.per_entity, 5);
        assert_eq!(s.generate.language, "english");
        assert!((s.generate.duplicate_threshold - 0.95).abs() < 1e-12);
        let s = settings(
            "[generate]\nmodel = \"openai/x\"\nper_entity = 2\nduplicate_threshold = 0.9\n",
        )
        .unwrap();
        assert_eq!(s.generate.model.as_deref(), Some("openai/x"));
        assert_eq!(s.generate.per_entity, 2);
        let e = settings("[generate]\ncolour = 1\n").unwrap_err();
        assert!(e.contains("colour"), "{e}");
        let e = settings("[generate]\nper_entity = 0\n").unwrap_err();
        assert!(e.contains("generate.per_entity"), "{e}");
        let e = settings("[generate]\nduplicate_threshold = 1.5\n").unwrap_err();
        assert!(e.contains("generate.duplicate_threshold"), "{e}");
        let e = settings("[generate]\nmodel = \"gpt\"\n").unwrap_err();
        assert!(e.contains("generate.model"), "{e}");
    }

    #[test]
    fn a_resumed_file_takes_every_new_draft_and_keeps_what_a_person_reviewed() {
        use assay_core::bank::StateCase;
        use assay_core::draft::{Draft, DraftStatus};
        let draft = |id: &str, note: Option<&str>, status: DraftStatus| Draft {
            case: serde_json::from_value::<StateCase>(serde_json::json!({
                "test_id": id, "user_state": {}, "expected_handlers": []
            }))
            .unwrap(),
            status,
            finding: None,
            reviewed_by: (status != DraftStatus::Pending).then(|| "ana".to_owned()),
            reviewed_at: None,
            note: note.map(str::to_owned),
            accepted_into: None,
        };
        let pending = DraftStatus::Pending;
        // What the interrupted process wrote: a draft whose calibration failed, one accepted
        // since, one edited since, and one the resumed process does not make.
        let earlier = vec![
            draft("a", Some("secondaries not drafted: 500"), pending),
            draft("c", None, DraftStatus::Accepted),
            draft("d", Some("edited by ana at t: prompt"), pending),
            draft("z", None, pending),
        ];
        let made = vec![
            draft("a", None, pending),
            draft("b", None, pending),
            draft("c", None, pending),
            draft("d", None, pending),
        ];
        let merged = merge_resumed(earlier, made);
        let ids: Vec<&str> = merged.iter().map(|d| d.case.test_id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c", "d", "z"]);
        // The new `a` replaces the one whose call failed; `c` and `d` are a person's.
        assert_eq!(merged[0].note, None);
        assert_eq!(merged[2].status, DraftStatus::Accepted);
        assert!(merged[3].note.as_deref().unwrap().starts_with("edited by"));
    }

    #[test]
    fn banks_parse_and_unknown_ones_are_named() {
        assert_eq!(
            parse_banks("pattern, semantic,pattern").unwrap(),
            vec![BankType::Pattern, BankType::Semantic]
        );
        let e = parse_banks("semantic,always").unwrap_err().to_string();
        assert!(e.contains("`always`"), "{e}");
        assert!(parse_banks(" , ").is_err());
    }
}
