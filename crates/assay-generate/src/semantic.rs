//! Semantic drafts: messages a user would write for each SITUATION entity (and for related
//! pairs), checked (not empty, in the language asked), near-duplicates dropped, each run
//! through the real pipeline (a message whose entity is not selected is a finding), and their
//! secondary expectations drafted by the calibrator.

use std::collections::{BTreeMap, HashMap, HashSet};

use assay_core::UserState;
use assay_core::bank::SemanticCase;
use assay_core::draft::{Draft, Finding, FindingKind, GenerationMethod, Provenance};
use assay_core::entity::Entity;
use assay_providers::{Embedder, SchemaCheck};
use assay_retrieval::pipeline::{Pipeline, Stage};
use serde::Deserialize;
use serde_json::Value;

use super::caller::{Call, Caller, Outcome};
use super::{BankOutcome, Context, prompts};
use crate::HarnessError;
use assay_project::expectations::{ExpectationSource, Resolved};
use assay_run::calibrate;

/// How the note of a draft whose secondaries the calibrator did not give begins.
pub const SECONDARIES_NOT_DRAFTED: &str = "secondaries not drafted";

/// A request for messages: one entity, or a related pair.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// The entity (or the two) the messages are for.
    pub entities: Vec<String>,
    /// The user turn.
    pub user: String,
    /// Messages asked for.
    pub n: u32,
}

fn keywords(e: &Entity) -> HashSet<String> {
    e.keywords
        .as_deref()
        .unwrap_or_default()
        .split(',')
        .map(|k| k.trim().to_lowercase())
        .filter(|k| !k.is_empty())
        .collect()
}

/// How related two entities are: 2 per shared keyword, 1 for the same subtype (0: not).
pub fn relatedness(a: &Entity, b: &Entity) -> usize {
    let shared = keywords(a).intersection(&keywords(b)).count();
    let subtype = usize::from(
        a.subtype.is_some()
            && a.subtype.as_deref().map(str::trim) == b.subtype.as_deref().map(str::trim),
    );
    2 * shared + subtype
}

/// Related pairs among `entities` (in id order): each entity in at most one pair, with its
/// most related partner not already paired (ties by id).
pub fn pairs(entities: &[&Entity]) -> Vec<(usize, usize)> {
    let mut paired = vec![false; entities.len()];
    let mut out = Vec::new();
    for i in 0..entities.len() {
        if paired[i] {
            continue;
        }
        let best = (0..entities.len())
            .filter(|&j| j != i && !paired[j])
            .map(|j| (relatedness(entities[i], entities[j]), j))
            .filter(|(score, _)| *score > 0)
            .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        if let Some((_, j)) = best {
            paired[i] = true;
            paired[j] = true;
            out.push((i.min(j), i.max(j)));
        }
    }
    out
}

/// Messages asked for each related pair, given the per-entity count.
pub fn pair_count(per_entity: u32) -> u32 {
    (per_entity / 3).max(1)
}

/// The generation calls for `entities` (SITUATION, sorted by id).
pub fn jobs(entities: &[&Entity], n: u32) -> Vec<Job> {
    let mut out: Vec<Job> = entities
        .iter()
        .map(|e| Job {
            entities: vec![e.entity_id.clone()],
            user: prompts::semantic_user(e, n),
            n,
        })
        .collect();
    for (a, b) in pairs(entities) {
        out.push(Job {
            entities: vec![entities[a].entity_id.clone(), entities[b].entity_id.clone()],
            user: prompts::pair_user(entities[a], entities[b], pair_count(n)),
            n: pair_count(n),
        });
    }
    out
}

#[derive(Deserialize)]
struct Written {
    message: String,
    persona: String,
    register: String,
}

#[derive(Deserialize)]
struct Reply {
    messages: Vec<Written>,
}

/// A message that passed the checks, before deduplication.
struct Candidate {
    job: usize,
    index: usize,
    message: String,
    persona: String,
    register: String,
    prompt_hash: String,
}

fn excerpt(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() > 100 {
        format!("{}…", line.chars().take(99).collect::<String>())
    } else {
        line
    }
}

/// What the pipeline must do with the message and what it did: `None` when every intended
/// entity is selected. Else a finding: **overlap** when, in the intended entity's place, a
/// SITUATION entity related to it (a shared keyword or subtype) was selected; a **retrieval
/// gap** otherwise.
fn judge(
    intended: &[String],
    selected: &[(String, bool)],
    by_id: &HashMap<&str, &Entity>,
) -> Option<Finding> {
    let ids: Vec<String> = selected.iter().map(|(id, _)| id.clone()).collect();
    let missing: Vec<&String> = intended.iter().filter(|i| !ids.contains(i)).collect();
    if missing.is_empty() {
        return None;
    }
    let rivals: Vec<&str> = selected
        .iter()
        .filter(|(id, situation)| *situation && !intended.contains(id))
        .map(|(id, _)| id.as_str())
        .filter(|id| {
            missing
                .iter()
                .any(|m| match (by_id.get(m.as_str()), by_id.get(id)) {
                    (Some(a), Some(b)) => relatedness(a, b) > 0,
                    _ => false,
                })
        })
        .collect();
    let missing_list = missing
        .iter()
        .map(|m| m.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let intended_text = format!(
        "written for {}: it should select them",
        intended.join(" and ")
    );
    Some(if rivals.is_empty() {
        Finding {
            kind: FindingKind::RetrievalGap,
            intended: intended_text,
            observed: ids,
            explanation: format!(
                "The pipeline does not select {missing_list} for a message written for it (a retrieval gap)."
            ),
        }
    } else {
        Finding {
            kind: FindingKind::Overlap,
            intended: intended_text,
            observed: ids,
            explanation: format!(
                "The pipeline selects {} instead of {missing_list}: the entities overlap.",
                rivals.join(", ")
            ),
        }
    })
}

/// Everything the semantic bank needs besides the context.
pub struct Inputs<'a> {
    /// The SITUATION entities selected, by id.
    pub entities: Vec<&'a Entity>,
    /// Every active entity (the calibrator sees them all).
    pub all: &'a [Entity],
    /// The pipeline, as `assay run` builds it.
    pub pipeline: &'a Pipeline,
    /// The project's embedder, behind the call wrapper.
    pub embedder: &'a dyn Embedder,
    /// Prompts of existing cases and drafts (a new message too close to one is dropped).
    pub existing: Vec<String>,
}

/// Generates, checks and judges the semantic drafts.
pub async fn generate(
    cx: &Context<'_>,
    caller: &Caller<'_>,
    inputs: &Inputs<'_>,
) -> Result<(Vec<Draft<SemanticCase>>, BankOutcome), HarnessError> {
    let mut outcome = BankOutcome::new("semantic");
    let jobs = jobs(&inputs.entities, cx.per_entity);
    let by_id: HashMap<&str, &Entity> = inputs
        .all
        .iter()
        .map(|e| (e.entity_id.as_str(), e))
        .collect();
    let system = prompts::semantic_system(&cx.language);
    let users: Vec<&str> = jobs.iter().map(|j| j.user.as_str()).collect();
    let replies = super::ask_each(
        caller,
        cx.concurrency,
        ("user_messages", prompts::messages_schema()),
        &system,
        &users,
    )
    .await?;

    // 1. Checks of each message.
    let mut candidates = Vec::new();
    for (j, (job, (reply, key))) in jobs.iter().zip(&replies).enumerate() {
        let who = job.entities.join("+");
        let Some(parsed) = outcome.parsed::<Reply>(&who, reply, |r| r.messages.is_empty()) else {
            continue;
        };
        for (index, w) in parsed.messages.into_iter().take(job.n as usize).enumerate() {
            let message = w.message.trim().to_owned();
            if message.is_empty() {
                outcome.reject(&who, "empty", "an empty message");
                continue;
            }
            if let Err(why) = super::language::check(&message, &cx.language) {
                outcome.reject(
                    &who,
                    "off_language",
                    &format!("{why}: {}", excerpt(&message)),
                );
                continue;
            }
            candidates.push(Candidate {
                job: j,
                index,
                message,
                persona: w.persona,
                register: w.register,
                prompt_hash: key.clone(),
            });
        }
    }

    // 2. Near-duplicates, against existing cases and earlier messages.
    let mut texts: Vec<String> = inputs.existing.clone();
    texts.extend(candidates.iter().map(|c| c.message.clone()));
    let vectors = if texts.is_empty() {
        HashMap::new()
    } else {
        assay_project::engine::embed_queries(inputs.embedder, &texts).await
    };
    let mut seen: Vec<(&str, &Vec<f32>)> = inputs
        .existing
        .iter()
        .filter_map(|p| match vectors.get(p) {
            Some(Ok(v)) => Some((p.as_str(), v)),
            _ => None,
        })
        .collect();
    let mut kept = Vec::new();
    for c in &candidates {
        let who = jobs[c.job].entities.join("+");
        let Some(Ok(v)) = vectors.get(&c.message) else {
            outcome.error(
                &who,
                &format!("embedding failed for: {}", excerpt(&c.message)),
            );
            continue;
        };
        if let Some((like, score)) = seen
            .iter()
            .map(|(p, w)| (*p, assay_providers::cosine(v, w)))
            .find(|(_, s)| f64::from(*s) >= cx.duplicate_threshold)
        {
            outcome.duplicates += 1;
            if outcome.duplicate_list.len() < super::LISTED {
                outcome.duplicate_list.push(format!(
                    "{who}: \"{}\" is {score:.3} like \"{}\"",
                    excerpt(&c.message),
                    excerpt(like)
                ));
            }
            continue;
        }
        seen.push((c.message.as_str(), v));
        kept.push((c, v));
    }

    // 3. The pipeline, then the calibrator's secondaries.
    let calib_system = calibrate::system_prompt(inputs.all);
    let known: HashSet<&str> = inputs.all.iter().map(|e| e.entity_id.as_str()).collect();
    let calib_schema = SchemaCheck::new("expectations", calibrate::proposal_schema())
        .map_err(|e| HarnessError::Infrastructure(e.to_string()))?;
    let calib_check =
        |v: &Value| calibrate::parse_proposal(&v.to_string(), &|id| known.contains(id)).map(|_| ());
    let mut drafts = Vec::new();
    let mut users = Vec::new();
    for (c, v) in &kept {
        let job = &jobs[c.job];
        let first = by_id.get(job.entities[0].as_str()).copied();
        let audience = first
            .and_then(|e| e.audience_types.first().cloned())
            .unwrap_or_else(|| assay_core::entity::DEFAULT_AUDIENCE.to_owned());
        let mut state = UserState::new();
        state.insert("user_type".into(), Value::String(audience.clone()));
        let retrieval = inputs
            .pipeline
            .retrieve(&c.message, Some(v.as_slice()), &state, &audience)
            .map_err(|e| {
                HarnessError::Infrastructure(format!("searching the knowledge base: {e}"))
            })?;
        let selected: Vec<(String, bool)> = retrieval
            .entities
            .iter()
            .map(|r| (r.entity_id.clone(), r.stage == Stage::Semantic))
            .collect();
        let finding = judge(&job.entities, &selected, &by_id);
        let pair = job.entities.len() > 1;
        let hash = prompts::digest(&[&cx.generation, &job.entities.join("+"), &c.message]);
        let test_id = format!(
            "GEN-{}-{}-{}",
            job.entities.join("-"),
            c.index + 1,
            &hash[..6]
        );
        let title = first.map_or(job.entities[0].as_str(), |e| e.title.as_str());
        let mut topics: Vec<String> = job
            .entities
            .iter()
            .filter_map(|id| by_id.get(id.as_str()).and_then(|e| e.subtype.clone()))
            .collect();
        topics.dedup();
        let mut variant = format!(
            "persona: {}; register: {}",
            c.persona.trim(),
            c.register.trim()
        );
        if pair {
            variant.push_str(&format!("; needs both {}", job.entities.join(" and ")));
        }
        let case = SemanticCase {
            test_id,
            name: format!("{title}: {}", c.persona.trim()),
            category: if pair { "generated_pair" } else { "generated" }.into(),
            topics,
            prompt: c.message.clone(),
            expected_primary: job.entities.clone(),
            expected_secondary: Vec::new(),
            not_expected: Vec::new(),
            rank_check: Vec::new(),
            user_state: state,
            known_missing: Vec::new(),
            provenance: Some(Provenance {
                method: GenerationMethod::Llm,
                entity_id: Some(job.entities[0].clone()),
                entity_versions: job
                    .entities
                    .iter()
                    .filter_map(|id| cx.versions.get(id).map(|v| (id.clone(), *v)))
                    .collect(),
                model: Some(cx.model.clone()),
                prompt_hash: Some(c.prompt_hash.clone()),
                language: Some(cx.language.clone()),
                variant: Some(variant),
                generation: Some(cx.generation.clone()),
                generated_at: cx.generated_at.clone(),
                accepted_by: None,
                accepted_at: None,
                confirmed_by: None,
                confirmed_at: None,
            }),
        };
        let current = Resolved {
            expectations: case.original_expectations(),
            source: ExpectationSource::Original,
            file: None,
        };
        users.push(calibrate::user_message(&case, &current));
        drafts.push(Draft {
            case,
            status: assay_core::draft::DraftStatus::default(),
            finding,
            reviewed_by: None,
            reviewed_at: None,
            note: None,
            accepted_into: None,
        });
    }
    let calib_calls: Vec<Call<'_>> = users
        .iter()
        .map(|user| Call {
            system: &calib_system,
            user,
            schema: &calib_schema,
            check: &calib_check,
            input_tokens: super::tokens(&calib_system) + super::tokens(user),
            max_tokens: calibrate::MAX_REPLY_TOKENS,
        })
        .collect();
    let proposals = super::run_all(caller, &calib_calls, cx.concurrency).await?;
    for (draft, (reply, _)) in drafts.iter_mut().zip(&proposals) {
        match reply {
            Outcome::Valid(v) => {
                match calibrate::parse_proposal(&v.to_string(), &|id| known.contains(id)) {
                    Ok(p) => {
                        draft.case.expected_secondary = p
                            .expectations
                            .expected_secondary
                            .into_iter()
                            .filter(|id| !draft.case.expected_primary.contains(id))
                            .collect();
                    }
                    Err(why) => draft.note = Some(format!("{SECONDARIES_NOT_DRAFTED}: {why}")),
                }
            }
            Outcome::Invalid(why) => draft.note = Some(format!("{SECONDARIES_NOT_DRAFTED}: {why}")),
            Outcome::Error(e) => {
                outcome.errors += 1;
                draft.note = Some(format!("{SECONDARIES_NOT_DRAFTED}: {e}"));
            }
            Outcome::OverBudget => {
                draft.note = Some(format!("{SECONDARIES_NOT_DRAFTED}: the budget was spent"));
            }
        }
    }
    for d in &drafts {
        let entity = d.case.expected_primary.join("+");
        *outcome.per_entity.entry(entity).or_default() += 1;
        if let Some(f) = &d.finding {
            outcome.finding(&d.case.test_id, f);
        }
    }
    outcome.drafts = drafts.len();
    Ok((drafts, outcome))
}

/// Counts per entity of a draft list (for tests).
pub fn per_entity(drafts: &[Draft<SemanticCase>]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for d in drafts {
        *out.entry(d.case.expected_primary.join("+")).or_default() += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(id: &str, subtype: Option<&str>, keywords: &str) -> Entity {
        let mut e: Entity = serde_json::from_value(serde_json::json!({
            "entity_id": id, "entity_type": "KNOWLEDGE", "title": id, "load_mode": "SITUATION"
        }))
        .unwrap();
        e.subtype = subtype.map(str::to_owned);
        e.keywords = Some(keywords.to_owned());
        e
    }

    #[test]
    fn pairs_take_the_most_related_partner_once() {
        let a = entity("a", Some("water"), "hose, leak");
        let b = entity("b", Some("water"), "rain barrel");
        let c = entity("c", Some("soil"), "leak, compost");
        let d = entity("d", Some("tools"), "shed");
        let all = [&a, &b, &c, &d];
        // a shares a keyword with c (2) and a subtype with b (1): a pairs with c; b has no one
        // left that is related; d neither.
        assert_eq!(pairs(&all), vec![(0, 2)]);
        assert_eq!(pair_count(5), 1);
        assert_eq!(pair_count(9), 3);
    }

    #[test]
    fn a_missing_entity_is_an_overlap_only_when_a_related_one_took_its_place() {
        let a = entity("a", Some("water"), "hose");
        let b = entity("b", Some("water"), "barrel");
        let c = entity("c", Some("tools"), "shed");
        let by_id: HashMap<&str, &Entity> = [("a", &a), ("b", &b), ("c", &c)].into_iter().collect();
        let intended = vec!["a".to_owned()];
        assert!(judge(&intended, &[("a".into(), true)], &by_id).is_none());
        let f = judge(&intended, &[("b".into(), true), ("c".into(), true)], &by_id).unwrap();
        assert_eq!(f.kind, FindingKind::Overlap);
        assert_eq!(f.observed, vec!["b", "c"]);
        let f = judge(&intended, &[("c".into(), true)], &by_id).unwrap();
        assert_eq!(f.kind, FindingKind::RetrievalGap);
    }
}
