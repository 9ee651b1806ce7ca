//! Knowledge-base entities (003 §1, §4).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// What kind of content an entity is.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum EntityType {
    /// Who the assistant is.
    Persona,
    /// Behavioural rules that must hold.
    Guardrail,
    /// Situation or state handlers.
    Handler,
    /// Domain knowledge.
    Knowledge,
    /// Reusable response scripts.
    Script,
    /// Operating rules.
    Rule,
}

impl EntityType {
    /// Every entity type, in schema order.
    pub const ALL: [EntityType; 6] = [
        EntityType::Persona,
        EntityType::Guardrail,
        EntityType::Handler,
        EntityType::Knowledge,
        EntityType::Script,
        EntityType::Rule,
    ];

    /// The upper-case name used in files and output.
    pub fn as_str(self) -> &'static str {
        match self {
            EntityType::Persona => "PERSONA",
            EntityType::Guardrail => "GUARDRAIL",
            EntityType::Handler => "HANDLER",
            EntityType::Knowledge => "KNOWLEDGE",
            EntityType::Script => "SCRIPT",
            EntityType::Rule => "RULE",
        }
    }
}

impl fmt::Display for EntityType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How an entity reaches the context.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Default,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LoadMode {
    /// Loaded for every message of a matching audience.
    Always,
    /// Loaded when its `state_conditions` hold for the user's state.
    State,
    /// Loaded when a message is semantically close (or a pattern rule names it).
    #[default]
    Situation,
}

impl LoadMode {
    /// The upper-case name used in files and output.
    pub fn as_str(self) -> &'static str {
        match self {
            LoadMode::Always => "ALWAYS",
            LoadMode::State => "STATE",
            LoadMode::Situation => "SITUATION",
        }
    }
}

impl fmt::Display for LoadMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Entity priority, 0–100 inclusive. Out-of-range values are rejected while parsing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct Priority(u8);

impl Priority {
    /// The default priority (50).
    pub const DEFAULT: Priority = Priority(50);

    /// A priority, or `None` when `value` is above 100.
    pub fn new(value: u8) -> Option<Priority> {
        (value <= 100).then_some(Priority(value))
    }

    /// The numeric value, 0–100.
    pub fn get(self) -> u8 {
        self.0
    }
}

impl Default for Priority {
    fn default() -> Self {
        Priority::DEFAULT
    }
}

impl schemars::JsonSchema for Priority {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Priority".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "integer",
            "minimum": 0,
            "maximum": 100,
            "description": "How much the entity matters, 0 to 100: it breaks ties in ranking and decides what stays when the token budget runs out."
        })
    }
}

impl<'de> Deserialize<'de> for Priority {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = i64::deserialize(deserializer)?;
        u8::try_from(value)
            .ok()
            .and_then(Priority::new)
            .ok_or_else(|| {
                serde::de::Error::custom(format!("priority {value} is out of range (0 to 100)"))
            })
    }
}

/// Who may edit an entity in an admin UI.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum EditableBy {
    /// Administrators only (default).
    #[default]
    Admin,
    /// Trainers and administrators.
    Trainer,
    /// Not shown in editing tools.
    Hidden,
}

fn default_audience() -> Vec<String> {
    vec![DEFAULT_AUDIENCE.to_owned()]
}

fn default_true() -> bool {
    true
}

/// The audience an entity has when its file names none.
pub const DEFAULT_AUDIENCE: &str = "PARENT";

/// One knowledge-base entity: a piece of guidance the assistant's context can be given, with
/// how and for whom it is loaded.
///
/// Audience types are free strings: each project defines its own audiences.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Entity {
    /// Stable identifier, unique within a knowledge base: 1 to 128 letters, digits, `_`, `-`
    /// or `.`.
    pub entity_id: String,
    /// The kind of content.
    pub entity_type: EntityType,
    /// Human-readable title.
    pub title: String,
    /// Optional finer classification.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subtype: Option<String>,
    /// What the concept is, in a sentence or two (shown to the model, not embedded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concept_summary: Option<String>,
    /// How a user's message shows the situation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recognition: Option<String>,
    /// Comma-separated keywords.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keywords: Option<String>,
    /// What to do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guidance_do: Option<String>,
    /// What to avoid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guidance_dont: Option<String>,
    /// Example exchanges.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub examples: Option<String>,
    /// Warning signs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub red_flags: Option<String>,
    /// How the entity reaches the context.
    #[serde(default)]
    pub load_mode: LoadMode,
    /// 0–100; adds `priority / 100 × priority_weight` to a retrieval score.
    #[serde(default)]
    pub priority: Priority,
    /// For STATE entities: the conditions on the user's state that load it, one test per
    /// field, all of which must hold: `{days_since_last: {gte: 7}}`. Operators: `eq`, `ne`,
    /// `gt`, `gte`, `lt`, `lte`, `in`, `nin`, `exists` (each also written with a `$`, as
    /// `$gte`); a bare list means `in`, a bare value `eq`. A missing or null field satisfies
    /// no comparison; only `exists: false` matches it. Every field has a type (a built-in
    /// field's, or the one `[state.fields]` declares), and every operand must be of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::condition::conditions_schema")]
    pub state_conditions: Option<Map<String, Value>>,
    /// Audiences this entity is for (default `["PARENT"]`).
    #[serde(default = "default_audience")]
    pub audience_types: Vec<String>,
    /// Attribution: author.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_author: Option<String>,
    /// Attribution: title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_title: Option<String>,
    /// Attribution: year.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_year: Option<i32>,
    /// Inactive entities are kept but never loaded.
    #[serde(default = "default_true")]
    pub is_active: bool,
    /// Who may edit it.
    #[serde(default)]
    pub editable_by: EditableBy,
}

impl Entity {
    /// Whether this entity serves `audience`.
    pub fn has_audience(&self, audience: &str) -> bool {
        self.audience_types.iter().any(|a| a == audience)
    }

    /// The text that is embedded for semantic search (003 §8): title, recognition, keywords
    /// and examples; never the concept summary.
    pub fn embedding_text(&self) -> String {
        let mut parts = vec![self.title.as_str()];
        for field in [&self.recognition, &self.keywords, &self.examples] {
            if let Some(text) = field.as_deref().filter(|t| !t.trim().is_empty()) {
                parts.push(text.trim());
            }
        }
        parts.join("\n\n")
    }

    /// The entity's retrieval **views**, each embedded (and indexed lexically) on its own when
    /// `[retrieval] views = "multi"`: `(key, text)` for the title (`title`), each recognition
    /// line (`recognition.1`, …; a leading `- ` and surrounding quotes removed), the keywords
    /// (`keywords`) and each example (`example.1`, …: blocks of the examples separated by a
    /// blank line). Empty parts are left out. Together they hold exactly the words of
    /// [`Entity::embedding_text`].
    pub fn views(&self) -> Vec<(String, String)> {
        let mut out = vec![("title".to_owned(), self.title.trim().to_owned())];
        if let Some(recognition) = self.recognition.as_deref() {
            let lines = recognition
                .lines()
                .map(|l| {
                    let l = l.trim();
                    let l = l
                        .strip_prefix("- ")
                        .or_else(|| l.strip_prefix('-'))
                        .unwrap_or(l);
                    l.trim().trim_matches('"').trim()
                })
                .filter(|l| !l.is_empty());
            for (i, line) in lines.enumerate() {
                out.push((format!("recognition.{}", i + 1), line.to_owned()));
            }
        }
        if let Some(keywords) = self.keywords.as_deref().map(str::trim)
            && !keywords.is_empty()
        {
            out.push(("keywords".to_owned(), keywords.to_owned()));
        }
        if let Some(examples) = self.examples.as_deref() {
            let mut block = String::new();
            let mut n = 0;
            let mut flush = |block: &mut String, out: &mut Vec<(String, String)>| {
                let text = block.trim();
                if !text.is_empty() {
                    n += 1;
                    out.push((format!("example.{n}"), text.to_owned()));
                }
                block.clear();
            };
            for line in examples.lines() {
                if line.trim().is_empty() {
                    flush(&mut block, &mut out);
                } else {
                    block.push_str(line.trim());
                    block.push('\n');
                }
            }
            flush(&mut block, &mut out);
        }
        out.retain(|(_, t)| !t.is_empty());
        out
    }

    /// The text injected into a prompt (003 §6 `_entity_to_prompt_text`), whose tokens count
    /// against the budget.
    pub fn prompt_text(&self) -> String {
        let mut sections = vec![format!("## {}", self.title)];
        let labelled = [
            (None, &self.concept_summary),
            (Some("Guidance"), &self.guidance_do),
            (Some("Avoid"), &self.guidance_dont),
            (Some("Examples"), &self.examples),
            (Some("Red Flags"), &self.red_flags),
        ];
        for (label, field) in labelled {
            if let Some(text) = field.as_deref().filter(|t| !t.is_empty()) {
                match label {
                    None => sections.push(text.to_owned()),
                    Some(label) => sections.push(format!("\n**{label}:**\n{text}")),
                }
            }
        }
        sections.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(json: &str) -> Result<Entity, serde_json::Error> {
        serde_json::from_str(json)
    }

    #[test]
    fn defaults_follow_the_schema() {
        let e = entity(r#"{"entity_id":"x","entity_type":"KNOWLEDGE","title":"X"}"#).unwrap();
        assert_eq!(e.load_mode, LoadMode::Situation);
        assert_eq!(e.priority.get(), 50);
        assert_eq!(e.audience_types, vec!["PARENT"]);
        assert!(e.is_active);
    }

    #[test]
    fn priority_out_of_range_is_rejected() {
        let err = entity(r#"{"entity_id":"x","entity_type":"RULE","title":"X","priority":101}"#)
            .unwrap_err();
        assert!(
            err.to_string().contains("priority 101 is out of range"),
            "{err}"
        );
        assert!(
            entity(r#"{"entity_id":"x","entity_type":"RULE","title":"X","priority":-1}"#).is_err()
        );
    }

    #[test]
    fn bad_enum_names_the_choices() {
        let err = entity(r#"{"entity_id":"x","entity_type":"FACT","title":"X"}"#).unwrap_err();
        assert!(err.to_string().contains("unknown variant `FACT`"), "{err}");
    }

    #[test]
    fn embedding_text_excludes_concept_summary() {
        let e = Entity {
            concept_summary: Some("BIFF is a framework".into()),
            recognition: Some("a nasty email".into()),
            examples: Some("Parent: hi".into()),
            ..entity(r#"{"entity_id":"b","entity_type":"SCRIPT","title":"BIFF"}"#).unwrap()
        };
        let text = e.embedding_text();
        assert!(text.contains("BIFF") && text.contains("nasty email") && text.contains("Parent:"));
        assert!(!text.contains("is a framework"));
    }

    #[test]
    fn views_split_recognition_lines_and_examples() {
        let e = Entity {
            recognition: Some("- \"He keeps baiting me.\"\n- The user notices.\n\n".into()),
            keywords: Some(" gray rock, baiting ".into()),
            examples: Some("Parent: one\nCoach: two\n\nParent: three\nCoach: four\n".into()),
            ..entity(r#"{"entity_id":"g","entity_type":"KNOWLEDGE","title":"Gray rock"}"#).unwrap()
        };
        let views = e.views();
        let keys: Vec<&str> = views.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "title",
                "recognition.1",
                "recognition.2",
                "keywords",
                "example.1",
                "example.2"
            ]
        );
        assert_eq!(views[1].1, "He keeps baiting me.");
        assert_eq!(views[3].1, "gray rock, baiting");
        assert_eq!(views[5].1, "Parent: three\nCoach: four");
        let bare = entity(r#"{"entity_id":"b","entity_type":"KNOWLEDGE","title":"T"}"#).unwrap();
        assert_eq!(bare.views(), vec![("title".to_owned(), "T".to_owned())]);
    }

    #[test]
    fn prompt_text_has_labelled_sections() {
        let e = Entity {
            concept_summary: Some("Summary.".into()),
            guidance_do: Some("Do this.".into()),
            red_flags: Some("Watch that.".into()),
            ..entity(r#"{"entity_id":"b","entity_type":"SCRIPT","title":"T"}"#).unwrap()
        };
        assert_eq!(
            e.prompt_text(),
            "## T\nSummary.\n\n**Guidance:**\nDo this.\n\n**Red Flags:**\nWatch that."
        );
    }
}
