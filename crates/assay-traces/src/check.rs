//! Each retrieval span's query through the project's pipeline, as `assay retrieve` does it
//! (the same embedder choice, embeddings brought up to date, the same search), and the
//! selection compared with what production returned.

use std::collections::{BTreeMap, HashSet};

use assay_core::runlog::CrisisMatch;
use assay_core::tracecheck::{
    Disagreement, DisagreementKind, ProductionDocument, SelectedEntity, SpanCheck,
    TRACE_CHECK_VERSION, TraceCheckReport,
};
use assay_kb::KnowledgeBase;
use assay_retrieval::pipeline::{RetrievedEntity, Stage};

use super::read::ReadOutcome;
use crate::HarnessError;
use assay_project::engine::{self, OpenStore, ProviderCalls};
use assay_project::project::Project;

/// Every pipeline stage, by name.
pub const STAGES: [(&str, Stage); 5] = [
    ("always", Stage::Always),
    ("state", Stage::State),
    ("crisis", Stage::Crisis),
    ("keyword", Stage::Keyword),
    ("semantic", Stage::Semantic),
];

/// Parses `--stages always,semantic,…`.
pub fn parse_stages(text: &str) -> Result<Vec<Stage>, HarnessError> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|name| {
            STAGES
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, s)| *s)
                .ok_or_else(|| {
                    let near = assay_core::text::closest(name, STAGES.iter().map(|(n, _)| *n))
                        .map(|n| format!(" (did you mean `{n}`?)"))
                        .unwrap_or_default();
                    HarnessError::Usage(format!(
                        "--stages: unknown stage `{name}`{near}; the stages are always, state, crisis, keyword, semantic"
                    ))
                })
        })
        .collect()
}

/// The choices of a check beyond the spans.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckSetup {
    /// The embedder (`--embedder`; else `ASSAY_EMBEDDER`, then `assay.toml`).
    pub embedder: Option<String>,
    /// The call-cache mode (`--cache`).
    pub cache: Option<String>,
    /// The stages whose entities count as missing when production lacks them (empty: all).
    pub stages: Vec<Stage>,
}

/// Checks every retrieval span `read` holds against the project: the embeddings of the
/// store's entities brought up to date, every query embedded through the provider-call wrapper
/// (cache, retries, limits), each span retrieved for its user state and audience and compared
/// with production's documents. A query whose embedding fails is an errored span, not an
/// error. The store must have been synchronised with the project ([`engine::sync_kb`]).
///
/// The future is not `Send` (the SQLite store is used across awaits).
pub async fn check_spans(
    project: &Project,
    store: &OpenStore,
    setup: &CheckSetup,
    env: &dyn Fn(&str) -> Option<String>,
    read: ReadOutcome,
) -> Result<TraceCheckReport, HarnessError> {
    let settings = &project.settings;
    let kb = engine::snapshot(&**store)?;
    let choice = engine::choose_embedder(settings, setup.embedder.as_deref(), env)?;
    let calls = ProviderCalls::open(
        settings,
        setup.cache.as_deref(),
        env,
        !choice.is_in_process(),
    )?;
    let embedder = calls.embedder(engine::build_embedder(&choice)?);
    let config = engine::retrieval_config(settings, &choice);
    let (pipeline, _, _) =
        engine::prepare_search_pipeline(store, &kb, project, embedder.as_ref(), config).await?;
    let queries: Vec<String> = read.spans.iter().map(|s| s.query.clone()).collect();
    let embedded = engine::embed_queries(embedder.as_ref(), &queries).await;
    let stages: Vec<Stage> = if setup.stages.is_empty() {
        STAGES.iter().map(|(_, s)| *s).collect()
    } else {
        setup.stages.clone()
    };
    let mut spans = Vec::with_capacity(read.spans.len());
    for span in read.spans {
        let state = span.user_state.clone().unwrap_or_default();
        let audience = assay_project::retrieve::audience(span.audience.as_deref(), &state);
        let mut check = SpanCheck {
            trace_id: span.trace_id,
            span_id: span.span_id,
            name: span.name,
            position: span.position,
            query: span.query,
            audience,
            user_state: span.user_state,
            production: span.documents,
            assay: Vec::new(),
            disagreements: Vec::new(),
            error: None,
        };
        let query = match embedded.get(&check.query) {
            Some(Ok(v)) => v.as_slice(),
            Some(Err(e)) => {
                check.error = Some(e.clone());
                spans.push(check);
                continue;
            }
            None => {
                check.error = Some("the query was not embedded".into());
                spans.push(check);
                continue;
            }
        };
        let retrieval = pipeline
            .retrieve(&check.query, Some(query), &state, &check.audience)
            .map_err(|e| {
                HarnessError::Infrastructure(format!("searching the knowledge base: {e}"))
            })?;
        let crisis = project
            .patterns
            .as_ref()
            .map(|p| p.match_message(&check.query).crisis_matches)
            .unwrap_or_default();
        check.disagreements = compare(
            &check.production,
            &retrieval.entities,
            &kb,
            &crisis,
            &stages,
        )?;
        check.assay = retrieval
            .entities
            .iter()
            .map(|e| SelectedEntity {
                entity_id: e.entity_id.clone(),
                stage: e.stage.to_string(),
            })
            .collect();
        spans.push(check);
    }
    let mut report = TraceCheckReport {
        version: TRACE_CHECK_VERSION,
        embedder: embedder.model().to_owned(),
        stages: stages.iter().map(ToString::to_string).collect(),
        files: read.files,
        other_spans: read.other_spans,
        checked: 0,
        agreeing: 0,
        disagreeing: 0,
        errored: 0,
        by_kind: BTreeMap::new(),
        by_entity: Vec::new(),
        problems: read.problems,
        spans,
    };
    report.tally();
    Ok(report)
}

/// Where production's documents and assay's selection disagree: crisis patterns that fired
/// with none of their entities returned; production's ids that are unknown, inactive, or not
/// selected (extra); entities selected by one of `stages` and not returned (missing); and
/// entities both have (and one of `stages` selected), ranked differently among those.
pub fn compare(
    production: &[ProductionDocument],
    selected: &[RetrievedEntity],
    kb: &dyn KnowledgeBase,
    crisis: &[CrisisMatch],
    stages: &[Stage],
) -> Result<Vec<Disagreement>, HarnessError> {
    let mut out = Vec::new();
    let disagreement = |kind, entity_id: &str| Disagreement {
        kind,
        entity_id: entity_id.to_owned(),
        production_rank: None,
        assay_rank: None,
        pattern: None,
        entities: Vec::new(),
    };
    // Production's ids, each once, with its 1-based rank.
    let mut seen = HashSet::new();
    let returned: Vec<(usize, &str)> = production
        .iter()
        .enumerate()
        .filter(|(_, d)| seen.insert(d.id.as_str()))
        .map(|(i, d)| (i + 1, d.id.as_str()))
        .collect();
    let returned_ids: HashSet<&str> = returned.iter().map(|(_, id)| *id).collect();
    let assay_rank = |id: &str| {
        selected
            .iter()
            .position(|e| e.entity_id == id)
            .map(|i| i + 1)
    };
    let counted = |e: &RetrievedEntity| {
        stages.contains(&e.stage) || e.also.iter().any(|s| stages.contains(s))
    };

    for m in crisis {
        if !m.entities.iter().any(|e| returned_ids.contains(e.as_str())) {
            let mut d = disagreement(
                DisagreementKind::CrisisUnhandled,
                m.entities.first().map_or("", String::as_str),
            );
            d.pattern = Some(m.pattern.clone());
            d.entities.clone_from(&m.entities);
            out.push(d);
        }
    }
    let mut common = Vec::new();
    for &(rank, id) in &returned {
        let kind = match kb.get(id)? {
            None => Some(DisagreementKind::Unknown),
            Some(e) if !e.is_active => Some(DisagreementKind::Inactive),
            Some(_) => match assay_rank(id) {
                Some(a) => {
                    if counted(&selected[a - 1]) {
                        common.push((rank, a, id));
                    }
                    None
                }
                None => Some(DisagreementKind::Extra),
            },
        };
        if let Some(kind) = kind {
            let mut d = disagreement(kind, id);
            d.production_rank = Some(rank);
            out.push(d);
        }
    }
    for (i, e) in selected.iter().enumerate() {
        if counted(e) && !returned_ids.contains(e.entity_id.as_str()) {
            let mut d = disagreement(DisagreementKind::Missing, &e.entity_id);
            d.assay_rank = Some(i + 1);
            out.push(d);
        }
    }
    // Among the entities both have: production's order against assay's.
    let mut by_assay = common.clone();
    by_assay.sort_by_key(|(_, a, _)| *a);
    for (i, &(rank, a, id)) in common.iter().enumerate() {
        if by_assay[i].2 != id {
            let mut d = disagreement(DisagreementKind::Rank, id);
            d.production_rank = Some(rank);
            d.assay_rank = Some(a);
            out.push(d);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_core::entity::{Entity, EntityType};
    use assay_kb::MemoryKb;

    fn entity(id: &str, active: bool) -> Entity {
        let mut e: Entity = serde_json::from_value(serde_json::json!({
            "entity_id": id, "entity_type": "KNOWLEDGE", "title": id, "load_mode": "SITUATION",
        }))
        .unwrap();
        e.is_active = active;
        e
    }

    fn selected(id: &str, stage: Stage) -> RetrievedEntity {
        RetrievedEntity {
            entity_id: id.into(),
            entity_type: EntityType::Knowledge,
            title: id.into(),
            stage,
            also: vec![],
            similarity: 1.0,
            priority: 50,
            priority_bonus: 0.0,
            final_score: 1.0,
            tokens: 1,
        }
    }

    fn doc(id: &str) -> ProductionDocument {
        ProductionDocument {
            id: id.into(),
            score: None,
        }
    }

    fn kinds(d: &[Disagreement]) -> Vec<(String, String)> {
        d.iter()
            .map(|d| (d.kind.to_string(), d.entity_id.clone()))
            .collect()
    }

    #[test]
    fn each_kind_of_disagreement() {
        let kb = MemoryKb::new(vec![
            entity("a", true),
            entity("b", true),
            entity("c", true),
            entity("old", false),
            entity("crisis", true),
        ])
        .unwrap();
        let assay = [
            selected("a", Stage::Semantic),
            selected("b", Stage::Semantic),
            selected("c", Stage::Always),
        ];
        let crisis = [CrisisMatch {
            pattern: "want to die".into(),
            matched_text: "want to die".into(),
            entities: vec!["crisis".into()],
        }];
        let all: Vec<Stage> = STAGES.iter().map(|(_, s)| *s).collect();
        let d = compare(
            &[doc("b"), doc("ghost"), doc("a"), doc("old"), doc("a")],
            &assay,
            &kb,
            &crisis,
            &all,
        )
        .unwrap();
        let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter()
                .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
                .collect()
        };
        assert_eq!(
            kinds(&d),
            pairs(&[
                ("crisis_unhandled", "crisis"),
                ("unknown", "ghost"),
                ("inactive", "old"),
                ("missing", "c"),
                ("rank", "b"),
                ("rank", "a"),
            ])
        );
        assert_eq!(d[4].production_rank, Some(1));
        assert_eq!(d[4].assay_rank, Some(2));
        // Only the semantic stage counts: the ALWAYS entity is not missing.
        let d = compare(&[doc("a"), doc("b")], &assay, &kb, &[], &[Stage::Semantic]).unwrap();
        assert!(d.is_empty(), "{d:?}");
        let d = compare(
            &[doc("a"), doc("c"), doc("b")],
            &assay,
            &kb,
            &[],
            &[Stage::Semantic],
        )
        .unwrap();
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(
            parse_stages("semantic, crisis").unwrap(),
            [Stage::Semantic, Stage::Crisis]
        );
        assert!(
            parse_stages("semantc")
                .unwrap_err()
                .to_string()
                .contains("`semantic`")
        );
    }
}
