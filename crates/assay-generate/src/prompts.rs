//! What the generator asks the model: the instructions, the entity or rule it writes for, and
//! the JSON Schema each reply must follow (sent with the request through
//! [`assay_providers::ask_structured`], checked on the way back).

use assay_core::bank::{CrisisPattern, KeywordBoost};
use assay_core::entity::Entity;
use serde_json::{Value, json};

pub use assay_project::hash::digest;

/// The most tokens one generation reply may have.
pub const MAX_REPLY_TOKENS: u32 = 2048;

const SEMANTIC_INSTRUCTIONS: &str = "\
You write realistic test messages for a retrieval system. The system reads a user's message \
and must find the knowledge-base entries that help answer it. You are given one entry (or two \
related entries) and write messages that real users would send when that entry is what they \
need.

Rules:
- Write as the users themselves, in the first person, never as the assistant.
- Vary the writers: persona (age, situation, mood), length (a few words to a short paragraph), \
register (casual, formal, upset, matter-of-fact). Put a typo or a missing capital in some.
- Describe the situation the way a user would. Do not copy the entry's title or its keywords \
word for word in most messages; a user rarely knows the right term.
- Every message must be in the language you are told, even if the entry is in another.
- Reply with one JSON object that follows the schema; nothing else.";

const PATTERN_INSTRUCTIONS: &str = "\
You write test messages for a rule that detects certain user messages (a crisis detector, or a \
keyword trigger) in a conversational product. For each rule you write messages that SHOULD \
fire it and look-alikes that share words or topic with it but must NOT fire it.

Rules:
- Write as the users themselves, in the first person, with varied personas, lengths and \
registers; put a typo in some.
- A message that should fire is one a careful human reviewer would say the rule exists to \
catch, whether or not the rule's exact wording matches it. Mark it `fire`.
- A look-alike is one the rule must leave alone (an idiom, a joke, a different topic that \
shares a word). Mark it `look_alike`.
- Mark each message with the outcome you mean, honestly: the test compares your intent with \
what the rule does, and a disagreement is reported to a person.
- Every message must be in the language you are told.
- Reply with one JSON object that follows the schema; nothing else.";

/// The writer's audience in words, for the prompt.
fn audience_line(entity: &Entity) -> String {
    let audiences = if entity.audience_types.is_empty() {
        vec![assay_core::entity::DEFAULT_AUDIENCE.to_owned()]
    } else {
        entity.audience_types.clone()
    };
    format!(
        "The messages are written by users of type {} (write as them, not as anyone else).",
        audiences.join(" or ")
    )
}

fn field(out: &mut String, name: &str, value: Option<&str>) {
    if let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) {
        out.push_str(&format!("{name}: {v}\n"));
    }
}

/// One entity as the model sees it.
pub fn entity_block(e: &Entity) -> String {
    let mut out = format!("## {} ({})\n", e.title, e.entity_id);
    field(&mut out, "kind", e.subtype.as_deref());
    field(&mut out, "what it is", e.concept_summary.as_deref());
    field(
        &mut out,
        "how users show this situation",
        e.recognition.as_deref(),
    );
    field(&mut out, "keywords", e.keywords.as_deref());
    field(&mut out, "warning signs", e.red_flags.as_deref());
    out
}

/// The system prompt of semantic generation.
pub fn semantic_system(language: &str) -> String {
    format!(
        "{SEMANTIC_INSTRUCTIONS}\n\nLanguage of every message: {}.",
        super::language::display_name(language)
    )
}

/// The user turn asking for `n` messages about one entity.
pub fn semantic_user(entity: &Entity, n: u32) -> String {
    format!(
        "{}\n{}\nWrite exactly {n} different messages for which this entry is what the user needs.",
        entity_block(entity),
        audience_line(entity)
    )
}

/// The user turn asking for `n` messages that need both entities of a related pair.
pub fn pair_user(a: &Entity, b: &Entity, n: u32) -> String {
    format!(
        "{}\n{}\n{}\nWrite exactly {n} different messages for which the user needs BOTH entries \
         at once (a situation that involves both).",
        entity_block(a),
        entity_block(b),
        audience_line(a)
    )
}

/// The schema of a semantic reply.
pub fn messages_schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["messages"],
        "properties": {
            "messages": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["message", "persona", "register"],
                    "properties": {
                        "message": {"type": "string"},
                        "persona": {"type": "string"},
                        "register": {"type": "string"}
                    }
                }
            }
        }
    })
}

/// The system prompt of pattern generation.
pub fn pattern_system(language: &str) -> String {
    format!(
        "{PATTERN_INSTRUCTIONS}\n\nLanguage of every message: {}.",
        super::language::display_name(language)
    )
}

fn titles(ids: &[String], kb: &dyn Fn(&str) -> Option<String>) -> String {
    ids.iter()
        .map(|id| match kb(id) {
            Some(t) => format!("{id} ({t})"),
            None => id.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The user turn for a crisis rule.
pub fn crisis_user(rule: &CrisisPattern, n: u32, kb: &dyn Fn(&str) -> Option<String>) -> String {
    format!(
        "Rule: a CRISIS detector. It is a case-insensitive regular expression:\n  {}\nWhen it \
         fires, it brings in: {}.\n\nWrite exactly {n} messages that should fire it (a user in \
         the crisis it is meant to catch, worded in different ways, including ways the \
         expression may not cover) and exactly {n} look-alikes that must not fire it.",
        rule.pattern,
        titles(&rule.entities, kb)
    )
}

/// The user turn for a keyword group.
pub fn keyword_user(rule: &KeywordBoost, n: u32, kb: &dyn Fn(&str) -> Option<String>) -> String {
    format!(
        "Rule: a KEYWORD trigger. It fires when a message contains any of these (case-insensitive{}):\n  {}\nWhen it fires, it brings in: {}.\n\nWrite exactly {n} messages that \
         should fire it (a user who asks for what it brings in) and exactly {n} look-alikes that \
         must not fire it.",
        if rule.whole_word {
            ", whole words only"
        } else {
            ""
        },
        rule.keywords.join(", "),
        titles(std::slice::from_ref(&rule.entity), kb)
    )
}

/// The schema of a pattern reply.
pub fn pattern_schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["messages"],
        "properties": {
            "messages": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["message", "intent", "why"],
                    "properties": {
                        "message": {"type": "string"},
                        "intent": {"type": "string", "enum": ["fire", "look_alike"]},
                        "why": {"type": "string"}
                    }
                }
            }
        }
    })
}
