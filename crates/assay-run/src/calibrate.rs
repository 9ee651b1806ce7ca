//! Calibrating semantic expectations with a strong chat model (000 §4, §7 `/calibrate`).
//!
//! [`calibrate`] asks the model, once per selected case, which entities the case's message should
//! (and should not) retrieve, given the whole knowledge base. Each request carries the proposal's
//! JSON schema ([`proposal_schema`]) and each reply is checked against it and against the
//! knowledge base through [`assay_providers::ask_structured_traced`]; an invalid one gets one
//! corrective follow-up turn, and a second invalid reply makes the case an error (data on the outcome, never written to history). Proposals are compared
//! with the expectations in force; only changed cases go into a new history file
//! `test_banks/semantic/history/expectations_<date>[_NN].json` (see [`assay_project::history`]). A case
//! under a human override keeps it: the proposal is recorded next to the override, which is
//! carried forward.
//!
//! Unless the request is a dry run, the raw replies go to
//! `calibration/opus_responses/calibration_<date>[_NN].json` and a record of the run is appended
//! to `calibration/calibration_log.json`. A dry run writes nothing at all. Existing history and
//! response files are never modified.
//!
//! The model is any [`ChatModel`]; retries of failed HTTP calls, rate limits and caching belong to
//! the wrapper the caller passes in, never to this module.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use assay_core::bank::{ExpectationSet, RankCheck, SemanticCase};
use assay_core::entity::Entity;
use assay_kb::datafile::{self, DataError, Format};
use assay_kb::{EntityFilter, KnowledgeBase};
use assay_providers::{ChatModel, ChatRequest, SchemaCheck, Usage, ask_structured_traced};
use chrono::{DateTime, SecondsFormat, Utc};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};

use crate::HarnessError;
use assay_project::expectations::{ExpectationSource, HistoryChange, HistoryFile, Resolved};
use assay_project::history::{self, append_history, write_dated_new};
use assay_project::project::Project;
use assay_project::results::write_replace;

/// The calibration folder under the project root (000 §2).
pub const CALIBRATION_DIR: &str = "calibration";
/// The log of calibration runs, a JSON array, in [`CALIBRATION_DIR`].
pub const CALIBRATION_LOG: &str = "calibration_log.json";
/// The folder of raw replies, in [`CALIBRATION_DIR`].
pub const RESPONSES_DIR: &str = "opus_responses";
/// The most tokens one reply may have.
pub const MAX_REPLY_TOKENS: u32 = 2048;
/// Calls in flight at once when the request says 0.
pub const DEFAULT_CONCURRENCY: usize = 4;

/// Which cases to calibrate (000 §7 `scope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Every semantic case.
    #[default]
    Full,
    /// The cases that mention an added entity, in their expectations or top candidates.
    Affected,
    /// The cases named in `test_ids`.
    Single,
}

impl Scope {
    /// `full`, `affected` or `single`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Full => "full",
            Scope::Affected => "affected",
            Scope::Single => "single",
        }
    }

    /// The trigger recorded when the request names none.
    fn default_trigger(self) -> &'static str {
        match self {
            Scope::Full => "full_recalibration",
            Scope::Affected => "kb_entity_added",
            Scope::Single => "single_case",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Scope {
    type Err = String;

    fn from_str(s: &str) -> Result<Scope, String> {
        match s {
            "full" => Ok(Scope::Full),
            "affected" => Ok(Scope::Affected),
            "single" => Ok(Scope::Single),
            other => Err(format!(
                "unknown calibration scope `{other}` (expected full, affected or single)"
            )),
        }
    }
}

/// What to calibrate (000 §7 `/calibrate` parameters).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CalibrationRequest {
    /// Which cases.
    pub scope: Scope,
    /// The cases for [`Scope::Single`] (and only for it).
    pub test_ids: Vec<String>,
    /// Entities added to the knowledge base; required for [`Scope::Affected`]. Each must be an
    /// entity of the knowledge base.
    pub added_entities: Vec<String>,
    /// The knowledge-base version, recorded in the history file and the log.
    pub kb_version: Option<String>,
    /// Ask the model and report, but write nothing.
    pub dry_run: bool,
    /// Why the calibration runs (`calibration_trigger`); defaults by scope: `full_recalibration`,
    /// `kb_entity_added`, `single_case`.
    pub trigger: Option<String>,
    /// Per test id, the top retrieval candidates (entity ids), computed by the caller; used by
    /// [`Scope::Affected`] to select cases whose candidates mention an added entity.
    pub top_candidates: HashMap<String, Vec<String>>,
    /// Chat calls in flight at once; 0 means [`DEFAULT_CONCURRENCY`].
    pub concurrency: usize,
}

/// A case's calibration result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CaseStatus {
    /// The proposal differs from the expectations in force; it is the new calibration.
    Changed,
    /// The proposal matches the expectations in force (order aside).
    Unchanged,
    /// The proposal differs, but a human override is in force and stays: the proposal is
    /// recorded next to it.
    OverrideKept,
    /// No valid proposal (a failed call, or two invalid replies); nothing written for it.
    Error,
}

impl CaseStatus {
    /// `changed`, `unchanged`, `override_kept` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            CaseStatus::Changed => "changed",
            CaseStatus::Unchanged => "unchanged",
            CaseStatus::OverrideKept => "override_kept",
            CaseStatus::Error => "error",
        }
    }
}

impl fmt::Display for CaseStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One case of a calibration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseOutcome {
    /// The case.
    pub test_id: String,
    /// What happened.
    pub status: CaseStatus,
    /// The expectations in force before.
    pub previous: ExpectationSet,
    /// Where they came from (`original`, `opus_<date>`, `human_override_<date>`).
    pub previous_source: String,
    /// The model's proposal, when valid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proposed: Option<ExpectationSet>,
    /// The model's explanation, when valid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// Why there is no proposal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Chat calls made (2 after a corrective retry).
    pub attempts: u32,
    /// What the calls consumed.
    pub usage: Usage,
}

/// How many cases ended how.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CalibrationCounts {
    /// Cases selected (and sent to the model).
    pub selected: usize,
    /// Cases whose proposal became the new calibration.
    pub changed: usize,
    /// Cases whose proposal matched the expectations in force.
    pub unchanged: usize,
    /// Cases whose human override stayed in force over a different proposal.
    pub overrides_kept: usize,
    /// Cases without a valid proposal.
    pub errors: usize,
}

/// The result of [`calibrate`]: per case, counts, and what was written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibrationOutcome {
    /// A fresh id for this run.
    pub run_id: String,
    /// When it ran (RFC 3339, UTC); the history file's `version`.
    pub timestamp: String,
    /// The model's `vendor/model` name.
    pub model: String,
    /// The calibration prompt's version: a digest of its instructions (without the knowledge
    /// base's entities, which the history's `kb_version` records) and the answer's schema.
    #[serde(default)]
    pub prompt_version: String,
    /// The scope.
    pub scope: Scope,
    /// The `calibration_trigger` recorded.
    pub trigger: String,
    /// The knowledge-base version recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kb_version: Option<String>,
    /// The added entities of the request.
    pub added_entities: Vec<String>,
    /// Nothing was written.
    pub dry_run: bool,
    /// The counts.
    pub counts: CalibrationCounts,
    /// Every selected case, in bank order.
    pub cases: Vec<CaseOutcome>,
    /// What all calls consumed.
    pub usage: Usage,
    /// The new history file, when a case changed (and not a dry run).
    pub history_file: Option<PathBuf>,
    /// The raw replies file (not on a dry run, nor when no case was selected).
    pub responses_file: Option<PathBuf>,
    /// The calibration log appended to (not on a dry run).
    pub log_file: Option<PathBuf>,
}

impl CalibrationOutcome {
    /// The ids of the cases selected, in bank order.
    pub fn test_ids(&self) -> Vec<&str> {
        self.cases.iter().map(|c| c.test_id.as_str()).collect()
    }
}

/// A valid proposal from the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal {
    /// The proposed expectations (duplicates within a list removed, order kept).
    pub expectations: ExpectationSet,
    /// The model's explanation.
    pub reasoning: String,
}

/// The calibration folder of a project.
pub fn calibration_dir(project: &Project) -> PathBuf {
    project.settings.root.join(CALIBRATION_DIR)
}

/// The active entities of the project's knowledge base, by entity id.
pub fn active_entities(project: &Project) -> Result<Vec<Entity>, HarnessError> {
    let mut entities = project.kb.kb.list(&EntityFilter {
        active: Some(true),
        ..EntityFilter::default()
    })?;
    entities.sort_by(|a, b| a.entity_id.cmp(&b.entity_id));
    Ok(entities)
}

fn mentions(e: &ExpectationSet, ids: &HashSet<&str>) -> bool {
    e.expected_primary
        .iter()
        .chain(&e.expected_secondary)
        .chain(&e.not_expected)
        .chain(e.rank_check.iter().flat_map(|r| [&r.higher, &r.lower]))
        .any(|id| ids.contains(id.as_str()))
}

/// Checks the request and selects its cases, in bank order. Usage errors: `single` without
/// test ids or with an unknown one; `affected` without added entities; an added entity that is
/// not in the knowledge base; test ids with another scope.
pub fn select_cases<'p>(
    project: &'p Project,
    request: &CalibrationRequest,
) -> Result<Vec<&'p SemanticCase>, HarnessError> {
    let mut unknown = Vec::new();
    for id in &request.added_entities {
        if !project.kb.kb.contains(id)? {
            unknown.push(format!("`{id}`"));
        }
    }
    if !unknown.is_empty() {
        return Err(HarnessError::Usage(format!(
            "added entities not in the knowledge base: {}",
            unknown.join(", ")
        )));
    }
    let cases = project.banks.semantic.iter().map(|l| &l.case);
    if request.scope != Scope::Single && !request.test_ids.is_empty() {
        return Err(HarnessError::Usage(format!(
            "test ids are only for scope `single` (the scope is `{}`)",
            request.scope
        )));
    }
    match request.scope {
        Scope::Full => Ok(cases.collect()),
        Scope::Single => {
            if request.test_ids.is_empty() {
                return Err(HarnessError::Usage(
                    "scope `single` needs the test ids to calibrate (--test-ids)".into(),
                ));
            }
            let known: HashSet<&str> = project
                .banks
                .semantic
                .iter()
                .map(|l| l.case.test_id.as_str())
                .collect();
            let unknown: Vec<String> = request
                .test_ids
                .iter()
                .filter(|id| !known.contains(id.as_str()))
                .map(|id| format!("`{id}`"))
                .collect();
            if !unknown.is_empty() {
                return Err(HarnessError::Usage(format!(
                    "unknown test id {}: no semantic case has it",
                    unknown.join(", ")
                )));
            }
            let wanted: HashSet<&str> = request.test_ids.iter().map(String::as_str).collect();
            Ok(cases
                .filter(|c| wanted.contains(c.test_id.as_str()))
                .collect())
        }
        Scope::Affected => {
            if request.added_entities.is_empty() {
                return Err(HarnessError::Usage(
                    "scope `affected` needs the added entities (--added-entities)".into(),
                ));
            }
            let added: HashSet<&str> = request.added_entities.iter().map(String::as_str).collect();
            Ok(cases
                .filter(|c| {
                    mentions(&project.expectations.resolve(c).expectations, &added)
                        || request
                            .top_candidates
                            .get(&c.test_id)
                            .is_some_and(|ids| ids.iter().any(|id| added.contains(id.as_str())))
                })
                .collect())
        }
    }
}

const INSTRUCTIONS: &str = "\
You calibrate the test expectations of a retrieval system. The system serves a knowledge-grounded \
assistant: for each user message it retrieves entities from the knowledge base below, and those \
entities shape the reply. A test case is a user message (with the user's state) and the entities \
retrieval should and should not return for it. You will get one case and the expectations \
currently on record, and you decide what they should be against the knowledge base as it is now.

Fields:
- expected_primary: the entities the message is centrally about; without them the reply would \
miss the point. Usually one or two. Never empty.
- expected_secondary: entities that would clearly help alongside the primary ones.
- not_expected: entities whose retrieval would be a real error for this message: near neighbours \
that share words but not meaning, or material that would mislead, alarm or pathologise. Do not \
list every unrelated entity.
- rank_check: pairs {\"higher\": ..., \"lower\": ...} where the higher entity must rank above \
the lower one; only where the order matters. Both must be in expected_primary or \
expected_secondary.

Rules:
- Use only entity_id values from the knowledge base, exactly as written. Never invent ids.
- An id may appear in only one of expected_primary, expected_secondary and not_expected.
- Read the message as the person means it, including understatement and indirect wording. Do not \
add facts it does not give.
- Safety comes first. If the message plausibly signals danger to anyone (violence, threats, \
abuse, self-harm, a child at risk), the knowledge base's safety or crisis entities belong in \
expected_primary, whatever else the message is about; never put them in not_expected then. When \
there is no such signal, they may belong in not_expected.
- Do not read ordinary stress or conflict as pathology: expect entities about serious clinical or \
legal concerns only when the message itself supports them.
- ALWAYS entities are loaded for every message and STATE entities by the user's state; expect \
them only when the message itself calls for them.
- Keep the current expectations where they are still right. Change them only for a reason you can \
state; returning them unchanged is a good answer.

Reply with exactly one JSON object and nothing else:
{\"expected_primary\": [\"...\"], \"expected_secondary\": [\"...\"], \"not_expected\": [\"...\"], \
\"rank_check\": [{\"higher\": \"...\", \"lower\": \"...\"}], \"reasoning\": \"...\"}
reasoning: one to three sentences on what the message is about and why anything changed.";

fn push_field(out: &mut String, label: &str, value: Option<&str>) {
    let Some(text) = value.map(str::trim).filter(|t| !t.is_empty()) else {
        return;
    };
    if text.contains('\n') {
        out.push_str(&format!("{label}:\n{text}\n"));
    } else {
        out.push_str(&format!("{label}: {text}\n"));
    }
}

/// One entity as the system prompt shows it: every field that carries meaning.
pub fn entity_block(e: &Entity) -> String {
    let mut out = format!("### {}\n", e.entity_id);
    let subtype = e
        .subtype
        .as_deref()
        .map_or_else(String::new, |s| format!(" ({s})"));
    out.push_str(&format!(
        "type: {}{subtype}; load mode: {}; audience: {}; priority: {}\n",
        e.entity_type,
        e.load_mode,
        e.audience_types.join(", "),
        e.priority.get()
    ));
    push_field(&mut out, "title", Some(&e.title));
    push_field(&mut out, "summary", e.concept_summary.as_deref());
    push_field(&mut out, "recognition", e.recognition.as_deref());
    push_field(&mut out, "keywords", e.keywords.as_deref());
    push_field(&mut out, "do", e.guidance_do.as_deref());
    push_field(&mut out, "avoid", e.guidance_dont.as_deref());
    push_field(&mut out, "examples", e.examples.as_deref());
    push_field(&mut out, "red flags", e.red_flags.as_deref());
    if let Some(conditions) = &e.state_conditions {
        let json = serde_json::to_string(conditions).unwrap_or_default();
        push_field(&mut out, "state conditions", Some(&json));
    }
    out
}

/// The system prompt: instructions, then every active entity by entity id. It is the same for
/// every case of a run (and across runs while the knowledge base is unchanged), so providers
/// can cache it.
pub fn system_prompt(entities: &[Entity]) -> String {
    let mut out = String::from(INSTRUCTIONS);
    out.push_str(&format!(
        "\n\n# Knowledge base ({} active entities, by entity_id)\n",
        entities.len()
    ));
    for e in entities {
        out.push('\n');
        out.push_str(&entity_block(e));
    }
    out
}

/// The user turn for one case: its message, the user's state and the expectations in force.
pub fn user_message(case: &SemanticCase, current: &Resolved) -> String {
    let mut out = format!("Test case {}", case.test_id);
    if !case.name.is_empty() {
        out.push_str(&format!(": {}", case.name));
    }
    out.push('\n');
    if !case.category.is_empty() || !case.topics.is_empty() {
        out.push_str(&format!(
            "category: {}; topics: {}\n",
            if case.category.is_empty() {
                "-"
            } else {
                &case.category
            },
            case.topics.join(", ")
        ));
    }
    out.push_str(&format!("\nUser message:\n<<<\n{}\n>>>\n", case.prompt));
    if case.user_state.is_empty() {
        out.push_str("\nUser state: none given\n");
    } else {
        let state = serde_json::to_string(&case.user_state).unwrap_or_default();
        out.push_str(&format!("\nUser state: {state}\n"));
    }
    let current_json = serde_json::to_string_pretty(&current.expectations).unwrap_or_default();
    out.push_str(&format!(
        "\nExpectations on record (source: {}):\n{current_json}\n\nReply with the calibrated \
         expectations as one JSON object.",
        current.source
    ));
    out
}

/// The JSON object in a reply: the whole text, or the text from its first `{` to its last `}`
/// (so a ```json fence or a sentence around a single object is tolerated).
fn json_object(text: &str) -> Result<serde_json::Value, String> {
    let (Some(start), Some(end)) = (text.find('{'), text.rfind('}')) else {
        return Err("the reply holds no JSON object".into());
    };
    if end < start {
        return Err("the reply holds no JSON object".into());
    }
    serde_json::from_str::<serde_json::Value>(&text[start..=end])
        .map_err(|e| format!("the reply is not a single JSON object ({e})"))
}

#[derive(Deserialize)]
struct RawProposal {
    expected_primary: Vec<String>,
    expected_secondary: Vec<String>,
    not_expected: Vec<String>,
    rank_check: Vec<RankCheck>,
    reasoning: String,
}

fn dedup(ids: Vec<String>) -> Vec<String> {
    let mut seen = HashSet::new();
    ids.into_iter()
        .filter(|id| seen.insert(id.clone()))
        .collect()
}

/// Parses and validates a reply against the schema: the five fields with their types, every id
/// an active entity (`known` says which ids are), a non-empty `expected_primary`, no id in two
/// of the three lists, and rank checks between expected entities. The error lists every problem
/// found.
pub fn parse_proposal(text: &str, known: &dyn Fn(&str) -> bool) -> Result<Proposal, String> {
    let value = json_object(text)?;
    if !value.is_object() {
        return Err("the reply's JSON is not an object".into());
    }
    proposal_from_value(value, known)
}

/// The JSON schema of a proposal, sent with every calibration request and checked first.
pub fn proposal_schema() -> serde_json::Value {
    let ids = serde_json::json!({"type": "array", "items": {"type": "string"}});
    serde_json::json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["expected_primary", "expected_secondary", "not_expected", "rank_check",
                     "reasoning"],
        "properties": {
            "expected_primary": ids,
            "expected_secondary": ids,
            "not_expected": ids,
            "rank_check": {"type": "array", "items": {
                "type": "object", "additionalProperties": false,
                "required": ["higher", "lower"],
                "properties": {"higher": {"type": "string"}, "lower": {"type": "string"}}}},
            "reasoning": {"type": "string"}
        }
    })
}

/// Validates a proposal's JSON object: see [`parse_proposal`].
fn proposal_from_value(
    value: serde_json::Value,
    known: &dyn Fn(&str) -> bool,
) -> Result<Proposal, String> {
    let raw: RawProposal = serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            e.inner().to_string()
        } else {
            format!("{path}: {}", e.inner())
        }
    })?;
    let expectations = ExpectationSet {
        expected_primary: dedup(raw.expected_primary),
        expected_secondary: dedup(raw.expected_secondary),
        not_expected: dedup(raw.not_expected),
        rank_check: {
            let mut seen = HashSet::new();
            raw.rank_check
                .into_iter()
                .filter(|r| seen.insert((r.higher.clone(), r.lower.clone())))
                .collect()
        },
    };
    let mut problems = Vec::new();
    if expectations.expected_primary.is_empty() {
        problems.push("expected_primary is empty (at least one entity is required)".to_owned());
    }
    let lists = [
        ("expected_primary", &expectations.expected_primary),
        ("expected_secondary", &expectations.expected_secondary),
        ("not_expected", &expectations.not_expected),
    ];
    for (field, ids) in lists {
        for id in ids {
            if !known(id) {
                problems.push(format!(
                    "{field}: `{id}` is not an entity_id of the knowledge base"
                ));
            }
        }
    }
    for (i, (a_name, a)) in lists.iter().enumerate() {
        for (b_name, b) in &lists[i + 1..] {
            for id in a.iter().filter(|id| b.contains(id)) {
                problems.push(format!("`{id}` is in both {a_name} and {b_name}"));
            }
        }
    }
    let expected: HashSet<&str> = expectations
        .expected_primary
        .iter()
        .chain(&expectations.expected_secondary)
        .map(String::as_str)
        .collect();
    for (i, r) in expectations.rank_check.iter().enumerate() {
        if r.higher == r.lower {
            problems.push(format!(
                "rank_check[{i}]: higher and lower are both `{}`",
                r.higher
            ));
        }
        for id in [&r.higher, &r.lower] {
            if !expected.contains(id.as_str()) {
                problems.push(format!(
                    "rank_check[{i}]: `{id}` is not in expected_primary or expected_secondary"
                ));
            }
        }
    }
    if problems.is_empty() {
        Ok(Proposal {
            expectations,
            reasoning: raw.reasoning.trim().to_owned(),
        })
    } else {
        Err(problems.join("; "))
    }
}

/// Whether two expectation sets say the same, ignoring order within the lists and among the
/// rank checks.
pub fn same_expectations(a: &ExpectationSet, b: &ExpectationSet) -> bool {
    fn set(ids: &[String]) -> BTreeSet<&str> {
        ids.iter().map(String::as_str).collect()
    }
    fn ranks(r: &[RankCheck]) -> BTreeSet<(&str, &str)> {
        r.iter()
            .map(|r| (r.higher.as_str(), r.lower.as_str()))
            .collect()
    }
    set(&a.expected_primary) == set(&b.expected_primary)
        && set(&a.expected_secondary) == set(&b.expected_secondary)
        && set(&a.not_expected) == set(&b.not_expected)
        && ranks(&a.rank_check) == ranks(&b.rank_check)
}

/// What happened in the conversation about one case.
#[derive(Debug, Default)]
struct CaseRun {
    replies: Vec<String>,
    stop_reasons: Vec<Option<String>>,
    reply_errors: Vec<String>,
    attempts: u32,
    usage: Usage,
    result: Option<Result<Proposal, String>>,
}

async fn run_case(
    model: &dyn ChatModel,
    system: &str,
    user: &str,
    known: &HashSet<&str>,
) -> CaseRun {
    let request = ChatRequest::new(Some(system.to_owned()), user, MAX_REPLY_TOKENS);
    let schema = match SchemaCheck::new("expectations", proposal_schema()) {
        Ok(schema) => schema,
        Err(e) => {
            return CaseRun {
                result: Some(Err(e.to_string())),
                ..CaseRun::default()
            };
        }
    };
    // One corrective turn, as before the shared helper existed.
    let (result, trace) = ask_structured_traced(model, request, &schema, 1, &|value| {
        proposal_from_value(value.clone(), &|id| known.contains(id))
    })
    .await;
    // Every allowed reply was unusable (rather than a call failing).
    let exhausted = trace.attempts.len() == 2 && trace.attempts.iter().all(|a| a.problem.is_some());
    let mut run = CaseRun {
        attempts: (trace.attempts.len() as u32).max(1),
        usage: trace.usage,
        ..CaseRun::default()
    };
    for attempt in trace.attempts {
        run.replies.push(attempt.reply);
        run.stop_reasons.push(attempt.stop_reason);
        if let Some(problem) = attempt.problem {
            run.reply_errors.push(problem);
        }
    }
    run.result = Some(match result {
        Ok((proposal, _)) => Ok(proposal),
        Err(_) if exhausted => Err(format!(
            "invalid reply after a corrective retry: {}",
            run.reply_errors.last().map_or("", String::as_str)
        )),
        Err(e) => Err(format!("chat call failed: {e}")),
    });
    run
}

/// A case of the raw-responses file.
#[derive(Serialize)]
struct RawCase<'a> {
    test_id: &'a str,
    status: CaseStatus,
    user_message: &'a str,
    replies: &'a [String],
    stop_reasons: &'a [Option<String>],
    reply_errors: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    proposal: Option<&'a Proposal>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    usage: Usage,
}

/// The raw-responses file.
#[derive(Serialize)]
struct RawFile<'a> {
    run_id: &'a str,
    timestamp: &'a str,
    model: &'a str,
    prompt_version: &'a str,
    scope: Scope,
    trigger: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    kb_version: Option<&'a str>,
    max_tokens: u32,
    system_prompt: &'a str,
    cases: Vec<RawCase<'a>>,
}

/// The calibration prompt's version: the first 16 hex digits of a SHA-256 over its system
/// prompt with no entity and its answer schema.
pub fn prompt_version() -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for part in [system_prompt(&[]), proposal_schema().to_string()] {
        h.update(part.len().to_le_bytes());
        h.update(part.as_bytes());
    }
    h.finalize()
        .iter()
        .take(8)
        .fold(String::new(), |mut out, b| {
            use std::fmt::Write as _;
            let _ = write!(out, "{b:02x}");
            out
        })
}

/// A record of the calibration log.
#[derive(Serialize)]
struct LogRecord<'a> {
    run_id: &'a str,
    timestamp: &'a str,
    model: &'a str,
    prompt_version: &'a str,
    scope: Scope,
    trigger: &'a str,
    test_ids: Vec<&'a str>,
    added_entities: &'a [String],
    kb_version: Option<&'a str>,
    counts: CalibrationCounts,
    usage: Usage,
    history_file: Option<String>,
    responses_file: Option<String>,
}

/// Reads the calibration log (a JSON array; missing or empty means no records). A malformed
/// log is an error naming the file.
fn read_log(path: &Path) -> Result<Vec<serde_json::Value>, HarnessError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(DataError::new(path, format!("cannot read file: {e}")).into()),
    };
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    datafile::parse::<Vec<serde_json::Value>>(path, &text, Format::Json, &mut |_| {}).map_err(
        |mut e| {
            e.message = format!(
                "the calibration log is not a JSON array of records: {}",
                e.message
            );
            e.into()
        },
    )
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

/// Calibrates the selected semantic cases of `project` with `model` (see the module docs).
///
/// `now` dates the run: the history file's `version`, and the `<date>` (UTC) of the file names.
/// Usage errors (exit 2) come before any call; a case whose calls fail or whose replies stay
/// invalid is an error on its [`CaseOutcome`], not an `Err`.
pub async fn calibrate(
    project: &Project,
    model: &dyn ChatModel,
    request: &CalibrationRequest,
    now: DateTime<Utc>,
) -> Result<CalibrationOutcome, HarnessError> {
    let selected = select_cases(project, request)?;
    let root = &project.settings.root;
    let log_path = calibration_dir(project).join(CALIBRATION_LOG);
    if !request.dry_run {
        // A malformed log stops the run before any call is paid for.
        read_log(&log_path)?;
    }
    let entities = active_entities(project)?;
    let known: HashSet<&str> = entities.iter().map(|e| e.entity_id.as_str()).collect();
    let system = system_prompt(&entities);
    let timestamp = now.to_rfc3339_opts(SecondsFormat::Secs, true);
    let date = now.format("%Y-%m-%d").to_string();
    let run_id = uuid::Uuid::new_v4().to_string();
    let trigger = request
        .trigger
        .clone()
        .unwrap_or_else(|| request.scope.default_trigger().to_owned());

    let prepared: Vec<(&SemanticCase, Resolved, String)> = selected
        .iter()
        .map(|case| {
            let resolved = project.expectations.resolve(case);
            let user = user_message(case, &resolved);
            (*case, resolved, user)
        })
        .collect();
    let concurrency = if request.concurrency == 0 {
        DEFAULT_CONCURRENCY
    } else {
        request.concurrency
    };
    let (system_ref, known_ref) = (&system, &known);
    // The futures are built up front: a stream mapping a closure would make this function's
    // future not `Send` (a higher-ranked lifetime limitation), and a server needs it `Send`.
    let calls: Vec<_> = prepared
        .iter()
        .enumerate()
        .map(|(i, (_, _, user))| {
            let user = user.as_str();
            async move { (i, run_case(model, system_ref, user, known_ref).await) }
        })
        .collect();
    let mut runs: Vec<(usize, CaseRun)> = futures_util::stream::iter(calls)
        .buffer_unordered(concurrency)
        .collect()
        .await;
    runs.sort_by_key(|(i, _)| *i);

    let mut counts = CalibrationCounts {
        selected: prepared.len(),
        ..CalibrationCounts::default()
    };
    let mut usage = Usage::default();
    let mut cases = Vec::with_capacity(prepared.len());
    let mut changes = Vec::new();
    for ((case, resolved, _), (_, run)) in prepared.iter().zip(&runs) {
        usage += run.usage;
        let mut outcome = CaseOutcome {
            test_id: case.test_id.clone(),
            status: CaseStatus::Error,
            previous: resolved.expectations.clone(),
            previous_source: resolved.source.to_string(),
            proposed: None,
            reasoning: None,
            error: None,
            attempts: run.attempts,
            usage: run.usage,
        };
        match &run.result {
            Some(Ok(p)) => {
                outcome.proposed = Some(p.expectations.clone());
                outcome.reasoning = Some(p.reasoning.clone());
                let kept = matches!(resolved.source, ExpectationSource::HumanOverride(_))
                    .then(|| project.expectations.human_override(&case.test_id))
                    .flatten();
                if same_expectations(&p.expectations, &resolved.expectations) {
                    outcome.status = CaseStatus::Unchanged;
                    counts.unchanged += 1;
                } else {
                    outcome.status = if kept.is_some() {
                        counts.overrides_kept += 1;
                        CaseStatus::OverrideKept
                    } else {
                        counts.changed += 1;
                        CaseStatus::Changed
                    };
                    changes.push(HistoryChange {
                        test_id: case.test_id.clone(),
                        previous: Some(resolved.expectations.clone()),
                        updated: Some(p.expectations.clone()),
                        opus_reasoning: Some(p.reasoning.clone()),
                        human_override: kept.cloned(),
                    });
                }
            }
            Some(Err(e)) => {
                outcome.error = Some(e.clone());
                counts.errors += 1;
            }
            None => {
                outcome.error = Some("no reply".into());
                counts.errors += 1;
            }
        }
        cases.push(outcome);
    }

    let mut result = CalibrationOutcome {
        run_id,
        timestamp,
        model: model.model().to_owned(),
        prompt_version: prompt_version(),
        scope: request.scope,
        trigger,
        kb_version: request.kb_version.clone(),
        added_entities: request.added_entities.clone(),
        dry_run: request.dry_run,
        counts,
        cases,
        usage,
        history_file: None,
        responses_file: None,
        log_file: None,
    };
    if request.dry_run {
        return Ok(result);
    }

    // Read the log again (another run may have appended meanwhile) before writing anything.
    let mut log = read_log(&log_path)?;
    if !changes.is_empty() {
        let file = HistoryFile {
            schema: None,
            version: Some(result.timestamp.clone()),
            calibration_trigger: Some(result.trigger.clone()),
            kb_version: result.kb_version.clone(),
            changed_count: Some(changes.len()),
            unchanged_count: Some(result.counts.unchanged),
            changes,
        };
        result.history_file = Some(append_history(
            &history::history_dir(&project.settings),
            &date,
            &file,
        )?);
    }
    if !result.cases.is_empty() {
        let raw = RawFile {
            run_id: &result.run_id,
            timestamp: &result.timestamp,
            model: &result.model,
            prompt_version: &result.prompt_version,
            scope: result.scope,
            trigger: &result.trigger,
            kb_version: result.kb_version.as_deref(),
            max_tokens: MAX_REPLY_TOKENS,
            system_prompt: &system,
            cases: result
                .cases
                .iter()
                .zip(&prepared)
                .zip(&runs)
                .map(|((outcome, (_, _, user)), (_, run))| RawCase {
                    test_id: &outcome.test_id,
                    status: outcome.status,
                    user_message: user,
                    replies: &run.replies,
                    stop_reasons: &run.stop_reasons,
                    reply_errors: &run.reply_errors,
                    proposal: run.result.as_ref().and_then(|r| r.as_ref().ok()),
                    error: outcome.error.as_deref(),
                    usage: run.usage,
                })
                .collect(),
        };
        let mut text = serde_json::to_string_pretty(&raw).map_err(|e| {
            HarnessError::Infrastructure(format!("cannot serialise the raw replies: {e}"))
        })?;
        text.push('\n');
        let dir = calibration_dir(project).join(RESPONSES_DIR);
        result.responses_file = Some(write_dated_new(
            &dir,
            "calibration",
            &date,
            None,
            text.as_bytes(),
        )?);
    }
    let record = LogRecord {
        run_id: &result.run_id,
        timestamp: &result.timestamp,
        model: &result.model,
        prompt_version: &result.prompt_version,
        scope: result.scope,
        trigger: &result.trigger,
        test_ids: result.test_ids(),
        added_entities: &result.added_entities,
        kb_version: result.kb_version.as_deref(),
        counts: result.counts,
        usage: result.usage,
        history_file: result.history_file.as_deref().map(|p| relative(root, p)),
        responses_file: result.responses_file.as_deref().map(|p| relative(root, p)),
    };
    log.push(serde_json::to_value(&record).map_err(|e| {
        HarnessError::Infrastructure(format!("cannot serialise the log record: {e}"))
    })?);
    let mut text = serde_json::to_string_pretty(&log).map_err(|e| {
        HarnessError::Infrastructure(format!("cannot serialise the calibration log: {e}"))
    })?;
    text.push('\n');
    if let Some(dir) = log_path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| {
            HarnessError::Infrastructure(format!("{}: cannot create folder: {e}", dir.display()))
        })?;
    }
    write_replace(&log_path, text.as_bytes()).map_err(|e| {
        HarnessError::Infrastructure(format!("{}: cannot write: {e}", log_path.display()))
    })?;
    result.log_file = Some(log_path);
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(id: &str) -> bool {
        ["a", "b", "c", "crisis"].contains(&id)
    }

    fn set(
        primary: &[&str],
        secondary: &[&str],
        not: &[&str],
        ranks: &[(&str, &str)],
    ) -> ExpectationSet {
        let v = |x: &[&str]| x.iter().map(|id| (*id).to_owned()).collect();
        ExpectationSet {
            expected_primary: v(primary),
            expected_secondary: v(secondary),
            not_expected: v(not),
            rank_check: ranks
                .iter()
                .map(|(h, l)| RankCheck {
                    higher: (*h).into(),
                    lower: (*l).into(),
                })
                .collect(),
        }
    }

    const GOOD: &str = r#"{"expected_primary": ["a"], "expected_secondary": ["b", "b"], "not_expected": ["crisis"], "rank_check": [{"higher": "a", "lower": "b"}], "reasoning": " why "}"#;

    #[test]
    fn a_valid_reply_parses_and_is_normalised() {
        let p = parse_proposal(GOOD, &known).unwrap();
        assert_eq!(
            p.expectations,
            set(&["a"], &["b"], &["crisis"], &[("a", "b")])
        );
        assert_eq!(p.reasoning, "why");
    }

    #[test]
    fn a_fence_or_text_around_the_object_is_tolerated() {
        for text in [
            format!("```json\n{GOOD}\n```"),
            format!("Here is my answer:\n{GOOD}\nThanks."),
        ] {
            assert!(parse_proposal(&text, &known).is_ok(), "{text}");
        }
    }

    #[test]
    fn invalid_replies_say_why() {
        let check = |text: &str, want: &str| {
            let e = parse_proposal(text, &known).unwrap_err();
            assert!(e.contains(want), "{e:?} should contain {want:?}");
        };
        check("no json here", "holds no JSON object");
        check("{\"a\": 1} and {\"b\": 2}", "not a single JSON object");
        check("[1, 2]", "holds no JSON object");
        check(
            r#"{"expected_primary": ["a"], "expected_secondary": [], "not_expected": [], "rank_check": []}"#,
            "missing field `reasoning`",
        );
        check(
            r#"{"expected_primary": "a", "expected_secondary": [], "not_expected": [], "rank_check": [], "reasoning": ""}"#,
            "expected_primary: invalid type",
        );
        check(
            r#"{"expected_primary": [], "expected_secondary": [], "not_expected": [], "rank_check": [], "reasoning": ""}"#,
            "expected_primary is empty",
        );
        check(
            r#"{"expected_primary": ["zz"], "expected_secondary": [], "not_expected": [], "rank_check": [], "reasoning": ""}"#,
            "expected_primary: `zz` is not an entity_id",
        );
        check(
            r#"{"expected_primary": ["a"], "expected_secondary": [], "not_expected": ["a"], "rank_check": [], "reasoning": ""}"#,
            "`a` is in both expected_primary and not_expected",
        );
        check(
            r#"{"expected_primary": ["a"], "expected_secondary": [], "not_expected": ["c"], "rank_check": [{"higher": "a", "lower": "c"}], "reasoning": ""}"#,
            "rank_check[0]: `c` is not in expected_primary or expected_secondary",
        );
    }

    #[test]
    fn comparison_ignores_order() {
        let a = set(&["a", "b"], &["c"], &[], &[("a", "b"), ("b", "c")]);
        let b = set(&["b", "a"], &["c"], &[], &[("b", "c"), ("a", "b")]);
        assert!(same_expectations(&a, &b));
        let c = set(&["a", "b"], &["c"], &[], &[("b", "a")]);
        assert!(!same_expectations(&a, &c));
        assert!(!same_expectations(&a, &set(&["a"], &["b", "c"], &[], &[])));
    }

    #[test]
    fn scopes_parse() {
        assert_eq!("affected".parse::<Scope>(), Ok(Scope::Affected));
        assert!("some".parse::<Scope>().unwrap_err().contains("`some`"));
    }

    #[test]
    fn the_system_prompt_lists_entities_with_their_fields() {
        let e: Entity = serde_json::from_value(serde_json::json!({
            "entity_id": "gray_rock", "entity_type": "KNOWLEDGE", "title": "Gray rock",
            "concept_summary": "Be boring.", "recognition": "- baiting\n- provoking",
            "keywords": "bait", "load_mode": "SITUATION"
        }))
        .unwrap();
        let p = system_prompt(&[e]);
        for want in [
            "### gray_rock\ntype: KNOWLEDGE; load mode: SITUATION; audience: PARENT; priority: 50",
            "title: Gray rock",
            "summary: Be boring.",
            "recognition:\n- baiting\n- provoking",
            "(1 active entities, by entity_id)",
        ] {
            assert!(p.contains(want), "missing {want:?}");
        }
    }
}
