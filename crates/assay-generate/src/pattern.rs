//! Pattern drafts: for each crisis rule and keyword group, messages the model means to fire it
//! and look-alikes it means not to, each run through the real matcher. Where the matcher does
//! not do what the model meant, the draft is a finding (the pattern misses a crisis message,
//! or fires on a look-alike) and keeps the model's intent as its expectation: a person
//! decides, nothing is relabelled to what the regex does.

use std::collections::HashMap;

use assay_core::bank::{PatternCase, PatternRules};
use assay_core::draft::{Draft, Finding, FindingKind, GenerationMethod, Provenance};
use assay_core::entity::Entity;
use assay_retrieval::patterns::PatternMatcher;
use serde::Deserialize;

use super::caller::Caller;
use super::{BankOutcome, Context, prompts};
use crate::HarnessError;

/// One rule to write for.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// `crisis` or `keyword`.
    pub kind: &'static str,
    /// Its index among the rules of its kind.
    pub index: usize,
    /// The regex, or the keywords joined.
    pub describe: String,
    /// The entities it brings in.
    pub entities: Vec<String>,
    /// A crisis rule that guards against harm.
    pub is_critical: bool,
    /// The user turn.
    pub user: String,
}

/// The rules to write for: every crisis rule and keyword group, or (with `only`) those that
/// bring in one of the entities named.
pub fn rules<S: std::hash::BuildHasher>(
    rules: &PatternRules,
    n: u32,
    only: Option<&[String]>,
    kb: &HashMap<&str, &Entity, S>,
) -> Vec<Rule> {
    let title = |id: &str| kb.get(id).map(|e| e.title.clone());
    let wanted = |ids: &[String]| only.is_none_or(|o| ids.iter().any(|id| o.contains(id)));
    let mut out = Vec::new();
    for (index, r) in rules.crisis_patterns.iter().enumerate() {
        if wanted(&r.entities) {
            out.push(Rule {
                kind: "crisis",
                index,
                describe: format!("crisis pattern `{}`", r.pattern),
                entities: r.entities.clone(),
                is_critical: r.is_critical,
                user: prompts::crisis_user(r, n, &title),
            });
        }
    }
    for (index, r) in rules.keyword_boosts.iter().enumerate() {
        let entities = vec![r.entity.clone()];
        if wanted(&entities) {
            out.push(Rule {
                kind: "keyword",
                index,
                describe: format!("keyword group [{}]", r.keywords.join(", ")),
                entities,
                is_critical: false,
                user: prompts::keyword_user(r, n, &title),
            });
        }
    }
    out
}

#[derive(Deserialize)]
struct Written {
    message: String,
    intent: String,
    why: String,
}

#[derive(Deserialize)]
struct Reply {
    messages: Vec<Written>,
}

/// What the matcher should do with a message meant as `fire` (or not), and what it did: a
/// finding when they differ.
fn judge(rule: &Rule, fire: bool, matched: &[&str]) -> Option<Finding> {
    let observed: Vec<String> = matched.iter().map(|s| (*s).to_owned()).collect();
    if fire {
        let missing: Vec<&str> = rule
            .entities
            .iter()
            .map(String::as_str)
            .filter(|e| !matched.contains(e))
            .collect();
        (!missing.is_empty()).then(|| Finding {
            kind: FindingKind::PatternMiss,
            intended: format!(
                "meant to fire the {} (bringing in {})",
                rule.describe,
                rule.entities.join(", ")
            ),
            observed,
            explanation: format!(
                "The generator meant this as a {} message; your pattern misses it ({} not matched).",
                if rule.kind == "crisis" { "crisis" } else { "keyword" },
                missing.join(", ")
            ),
        })
    } else {
        let fired: Vec<&str> = rule
            .entities
            .iter()
            .map(String::as_str)
            .filter(|e| matched.contains(e))
            .collect();
        (!fired.is_empty()).then(|| Finding {
            kind: FindingKind::PatternFalseAlarm,
            intended: format!(
                "meant as a look-alike the {} must not fire on",
                rule.describe
            ),
            observed,
            explanation: format!(
                "The generator meant this as a look-alike; your pattern fires on it ({} matched).",
                fired.join(", ")
            ),
        })
    }
}

/// Generates the pattern drafts and runs them through `matcher`.
pub async fn generate(
    cx: &Context<'_>,
    caller: &Caller<'_>,
    rules: &[Rule],
    matcher: &PatternMatcher,
) -> Result<(Vec<Draft<PatternCase>>, BankOutcome), HarnessError> {
    let mut outcome = BankOutcome::new("pattern");
    let system = prompts::pattern_system(&cx.language);
    let users: Vec<&str> = rules.iter().map(|r| r.user.as_str()).collect();
    let replies = super::ask_each(
        caller,
        cx.concurrency,
        ("pattern_messages", prompts::pattern_schema()),
        &system,
        &users,
    )
    .await?;
    let mut drafts = Vec::new();
    for (rule, (reply, key)) in rules.iter().zip(&replies) {
        let who = format!("{} rule {}", rule.kind, rule.index + 1);
        let Some(parsed) = outcome.parsed::<Reply>(&who, reply, |r| r.messages.is_empty()) else {
            continue;
        };
        let mut taken: HashMap<bool, usize> = HashMap::new();
        for w in parsed.messages {
            let fire = w.intent == "fire";
            let n = taken.entry(fire).or_default();
            if *n >= cx.per_entity as usize {
                continue;
            }
            let message = w.message.trim().to_owned();
            if message.is_empty() {
                outcome.reject(&who, "empty", "an empty message");
                continue;
            }
            if let Err(why) = super::language::check(&message, &cx.language) {
                outcome.reject(&who, "off_language", &why);
                continue;
            }
            *n += 1;
            let matched = matcher.matched_entities(&message);
            let finding = judge(rule, fire, &matched);
            let hash = prompts::digest(&[&cx.generation, rule.kind, &rule.describe, &message]);
            let test_id = format!(
                "GEN-PAT-{}{}-{}-{}-{}",
                rule.kind,
                rule.index + 1,
                if fire { "fire" } else { "lookalike" },
                *n,
                &hash[..6]
            );
            let case = PatternCase {
                test_id,
                name: w.why.trim().to_owned(),
                prompt: message,
                expected_matches: if fire {
                    rule.entities.clone()
                } else {
                    Vec::new()
                },
                expected_secondary: Vec::new(),
                not_expected_matches: if fire {
                    Vec::new()
                } else {
                    rule.entities.clone()
                },
                pattern_type: if fire { rule.kind } else { "negative" }.to_owned(),
                is_critical: fire && rule.is_critical,
                known_missing: Vec::new(),
                provenance: Some(Provenance {
                    method: GenerationMethod::Llm,
                    entity_id: rule.entities.first().cloned(),
                    entity_versions: rule
                        .entities
                        .iter()
                        .filter_map(|id| cx.versions.get(id).map(|v| (id.clone(), *v)))
                        .collect(),
                    model: Some(cx.model.clone()),
                    prompt_hash: Some(key.clone()),
                    language: Some(cx.language.clone()),
                    variant: Some(format!(
                        "{}; intent: {}",
                        rule.describe,
                        if fire { "fire" } else { "look-alike" }
                    )),
                    generation: Some(cx.generation.clone()),
                    generated_at: cx.generated_at.clone(),
                    accepted_by: None,
                    accepted_at: None,
                    confirmed_by: None,
                    confirmed_at: None,
                }),
            };
            if let Some(f) = &finding {
                outcome.finding(&case.test_id, f);
            }
            *outcome
                .per_entity
                .entry(format!("{} rule {}", rule.kind, rule.index + 1))
                .or_default() += 1;
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
    }
    outcome.drafts = drafts.len();
    Ok((drafts, outcome))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule() -> Rule {
        Rule {
            kind: "crisis",
            index: 0,
            describe: "crisis pattern `x`".into(),
            entities: vec!["h".into(), "r".into()],
            is_critical: true,
            user: String::new(),
        }
    }

    #[test]
    fn intent_against_the_matcher() {
        let r = rule();
        assert!(judge(&r, true, &["h", "r"]).is_none());
        let f = judge(&r, true, &["h"]).unwrap();
        assert_eq!(f.kind, FindingKind::PatternMiss);
        assert!(
            f.explanation.contains("crisis message"),
            "{}",
            f.explanation
        );
        assert!(f.explanation.contains("r not matched"), "{}", f.explanation);
        assert!(judge(&r, false, &["other"]).is_none());
        let f = judge(&r, false, &["r"]).unwrap();
        assert_eq!(f.kind, FindingKind::PatternFalseAlarm);
        assert_eq!(f.observed, vec!["r"]);
    }
}
