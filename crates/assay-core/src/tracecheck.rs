//! Production traces checked against the project (`assay traces check`, `assay serve`'s
//! `/v1/traces`): the flat span line assay reads and writes ([`FlatSpan`]), the result of
//! checking retrieval spans ([`TraceCheckReport`]: every span's disagreements, and the counts
//! by kind and by entity) and the draft test cases made from spans ([`DraftFile`]).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::UserState;
use crate::bank::SemanticCase;

/// The version of [`TraceCheckReport`]'s shape.
pub const TRACE_CHECK_VERSION: u32 = 1;

/// One span, one JSON object: a line of a `.jsonl` trace file in assay's flat form (what
/// `assay serve` appends to `.assay/traces/received-<date>.jsonl`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FlatSpan {
    /// The trace id, hex (32 digits in OTLP).
    pub trace_id: String,
    /// The span id, hex (16 digits in OTLP).
    pub span_id: String,
    /// The parent span's id, hex, when the span has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_span_id: Option<String>,
    /// The span's name.
    #[serde(default)]
    pub name: String,
    /// When the span started, in nanoseconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time_unix_nano: Option<u64>,
    /// The service that sent it (the resource's `service.name`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    /// When assay received it (RFC 3339), for spans `assay serve` wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received_at: Option<String>,
    /// The span's attributes by name: strings, numbers, booleans, arrays and objects (an OTLP
    /// key-value list). A retrieval span has `gen_ai.operation.name` = `retrieval`,
    /// `gen_ai.retrieval.query.text`, `gen_ai.retrieval.documents` and, optionally,
    /// `assay.user_state` and `assay.audience`.
    pub attributes: BTreeMap<String, serde_json::Value>,
}

/// Where a span, or a problem, was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpanPosition {
    /// The file (as named on the command line, or `request` for a span `assay serve` received).
    pub file: String,
    /// The 1-based line (JSON Lines, or where a JSON file stopped parsing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// The JSON path in the file or line (`resourceSpans[0].scopeSpans[1].spans[3]`); empty
    /// when the line is the span.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
}

impl fmt::Display for SpanPosition {
    /// `file:line resourceSpans[0].scopeSpans[0].spans[2]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if !self.path.is_empty() {
            write!(f, " {}", self.path)?;
        }
        Ok(())
    }
}

/// A span, line or file that could not be read: skipped, the rest still checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceProblem {
    /// Where.
    pub position: SpanPosition,
    /// The attribute at fault, when one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribute: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for TraceProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.position)?;
        if let Some(a) = &self.attribute {
            write!(f, ": `{a}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// A kind of disagreement between production's retrieval and assay's selection.
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
#[serde(rename_all = "snake_case")]
pub enum DisagreementKind {
    /// Assay selects the entity; production did not return it.
    Missing,
    /// Production returned an active entity assay does not select.
    Extra,
    /// Both have the entity, in a different order among the entities both have.
    Rank,
    /// Production returned an id the knowledge base does not hold.
    Unknown,
    /// Production returned an entity that is inactive (deactivated) in the knowledge base.
    Inactive,
    /// A crisis pattern fires on the query and production returned none of its entities.
    CrisisUnhandled,
}

impl DisagreementKind {
    /// Every kind, in report order.
    pub const ALL: [DisagreementKind; 6] = [
        DisagreementKind::CrisisUnhandled,
        DisagreementKind::Missing,
        DisagreementKind::Unknown,
        DisagreementKind::Inactive,
        DisagreementKind::Extra,
        DisagreementKind::Rank,
    ];

    /// `missing`, `crisis_unhandled`, ….
    pub fn as_str(self) -> &'static str {
        match self {
            DisagreementKind::Missing => "missing",
            DisagreementKind::Extra => "extra",
            DisagreementKind::Rank => "rank",
            DisagreementKind::Unknown => "unknown",
            DisagreementKind::Inactive => "inactive",
            DisagreementKind::CrisisUnhandled => "crisis_unhandled",
        }
    }

    /// What it means, in words.
    pub fn describe(self) -> &'static str {
        match self {
            DisagreementKind::Missing => "selected by assay, not returned in production",
            DisagreementKind::Extra => "returned in production, not selected by assay",
            DisagreementKind::Rank => "ranked differently",
            DisagreementKind::Unknown => "served in production, unknown to the knowledge base",
            DisagreementKind::Inactive => "served in production, inactive in the knowledge base",
            DisagreementKind::CrisisUnhandled => {
                "crisis pattern fired, production loaded none of its entities"
            }
        }
    }
}

impl fmt::Display for DisagreementKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One disagreement of a span.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Disagreement {
    /// Its kind.
    pub kind: DisagreementKind,
    /// The entity (for `crisis_unhandled`, the pattern's first entity).
    pub entity_id: String,
    /// Its 1-based rank in production's documents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub production_rank: Option<usize>,
    /// Its 1-based rank in assay's selection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assay_rank: Option<usize>,
    /// For `crisis_unhandled`: the crisis pattern that fired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// For `crisis_unhandled`: every entity the pattern loads.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entities: Vec<String>,
}

/// A document production returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProductionDocument {
    /// The entity id.
    pub id: String,
    /// Its score, when production recorded one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
}

/// An entity assay selects, with the pipeline stage that brought it in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SelectedEntity {
    /// The entity id.
    pub entity_id: String,
    /// `always`, `state`, `crisis`, `keyword` or `semantic`.
    pub stage: String,
}

/// One retrieval span checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpanCheck {
    /// The trace id.
    pub trace_id: String,
    /// The span id.
    pub span_id: String,
    /// The span's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Where it was read.
    pub position: SpanPosition,
    /// The query.
    pub query: String,
    /// The audience assay retrieved for.
    pub audience: String,
    /// The user state production recorded, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_state: Option<UserState>,
    /// What production returned, in rank order.
    pub production: Vec<ProductionDocument>,
    /// What assay selects, in rank order.
    pub assay: Vec<SelectedEntity>,
    /// Where they disagree (empty: they agree).
    pub disagreements: Vec<Disagreement>,
    /// Why the span could not be checked (the query's embedding failed), if it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// An entity's disagreements, counted by kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EntityTally {
    /// The entity.
    pub entity_id: String,
    /// All its disagreements.
    pub total: usize,
    /// By kind.
    pub by_kind: BTreeMap<DisagreementKind, usize>,
}

/// Retrieval spans checked against the project.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceCheckReport {
    /// [`TRACE_CHECK_VERSION`].
    pub version: u32,
    /// The embedder assay's selection was made with.
    pub embedder: String,
    /// The stages whose entities count as missing when production lacks them.
    pub stages: Vec<String>,
    /// The files read.
    pub files: Vec<String>,
    /// Spans read that are not retrieval spans (not checked).
    pub other_spans: usize,
    /// Retrieval spans checked.
    pub checked: usize,
    /// Spans where production and assay agree.
    pub agreeing: usize,
    /// Spans with at least one disagreement.
    pub disagreeing: usize,
    /// Spans that could not be checked (see each span's `error`).
    pub errored: usize,
    /// Disagreements by kind.
    pub by_kind: BTreeMap<DisagreementKind, usize>,
    /// Disagreements by entity, most first, then by id.
    pub by_entity: Vec<EntityTally>,
    /// What was skipped, with its position.
    pub problems: Vec<TraceProblem>,
    /// Every span's result, in the order read.
    pub spans: Vec<SpanCheck>,
}

impl TraceCheckReport {
    /// Counts the spans' disagreements by kind and by entity and fills the totals.
    pub fn tally(&mut self) {
        self.checked = self.spans.len();
        self.errored = self.spans.iter().filter(|s| s.error.is_some()).count();
        self.disagreeing = self
            .spans
            .iter()
            .filter(|s| !s.disagreements.is_empty())
            .count();
        self.agreeing = self.checked - self.disagreeing - self.errored;
        self.by_kind.clear();
        let mut entities: BTreeMap<&str, BTreeMap<DisagreementKind, usize>> = BTreeMap::new();
        for d in self.spans.iter().flat_map(|s| &s.disagreements) {
            *self.by_kind.entry(d.kind).or_default() += 1;
            *entities
                .entry(&d.entity_id)
                .or_default()
                .entry(d.kind)
                .or_default() += 1;
        }
        let mut by_entity: Vec<EntityTally> = entities
            .into_iter()
            .map(|(id, by_kind)| EntityTally {
                entity_id: id.to_owned(),
                total: by_kind.values().sum(),
                by_kind,
            })
            .collect();
        by_entity.sort_by(|a, b| b.total.cmp(&a.total).then(a.entity_id.cmp(&b.entity_id)));
        self.by_entity = by_entity;
    }

    /// Whether any span disagrees.
    pub fn has_disagreements(&self) -> bool {
        self.disagreeing > 0
    }
}

/// Where a draft case came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DraftProvenance {
    /// The trace id.
    pub trace_id: String,
    /// The span id.
    pub span_id: String,
    /// The file the span was read from.
    pub file: String,
    /// Its line, in a JSON Lines file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// Its JSON path in the file or line.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
    /// The audience assay retrieved for.
    pub audience: String,
    /// What production returned, in rank order.
    pub production: Vec<ProductionDocument>,
    /// What assay selects, in rank order.
    pub assay_selects: Vec<SelectedEntity>,
    /// Where they disagreed.
    #[serde(default)]
    pub disagreements: Vec<Disagreement>,
}

/// A draft case: a semantic-bank case and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DraftCase {
    /// The case, as a semantic bank holds it: review it, then copy it into a bank.
    pub case: SemanticCase,
    /// The span it was made from.
    pub provenance: DraftProvenance,
}

/// Draft test cases made from production retrieval spans (`assay traces check --drafts`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DraftFile {
    /// Always `semantic`: each draft is a semantic-bank case.
    pub draft_type: String,
    /// When the drafts were written (RFC 3339).
    pub created: String,
    /// What the drafts are for, in words.
    #[serde(default)]
    pub description: String,
    /// The drafts.
    pub drafts: Vec<DraftCase>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(kinds: &[(DisagreementKind, &str)]) -> SpanCheck {
        SpanCheck {
            trace_id: "t".into(),
            span_id: "s".into(),
            name: String::new(),
            position: SpanPosition {
                file: "f".into(),
                line: Some(1),
                path: String::new(),
            },
            query: "q".into(),
            audience: "PARENT".into(),
            user_state: None,
            production: vec![],
            assay: vec![],
            disagreements: kinds
                .iter()
                .map(|(kind, id)| Disagreement {
                    kind: *kind,
                    entity_id: (*id).into(),
                    production_rank: None,
                    assay_rank: None,
                    pattern: None,
                    entities: vec![],
                })
                .collect(),
            error: None,
        }
    }

    #[test]
    fn tally_counts_by_kind_and_entity() {
        let mut report = TraceCheckReport {
            version: TRACE_CHECK_VERSION,
            embedder: "e".into(),
            stages: vec![],
            files: vec![],
            other_spans: 0,
            checked: 0,
            agreeing: 0,
            disagreeing: 0,
            errored: 0,
            by_kind: BTreeMap::new(),
            by_entity: vec![],
            problems: vec![],
            spans: vec![
                span(&[]),
                span(&[
                    (DisagreementKind::Missing, "b"),
                    (DisagreementKind::Extra, "a"),
                ]),
                span(&[(DisagreementKind::Missing, "b")]),
            ],
        };
        report.tally();
        assert_eq!(
            (report.checked, report.agreeing, report.disagreeing),
            (3, 1, 2)
        );
        assert_eq!(report.by_kind[&DisagreementKind::Missing], 2);
        assert_eq!(report.by_entity[0].entity_id, "b");
        assert_eq!(report.by_entity[0].total, 2);
        assert_eq!(
            SpanPosition {
                file: "x.json".into(),
                line: Some(3),
                path: "spans[1]".into()
            }
            .to_string(),
            "x.json:3 spans[1]"
        );
    }
}
