//! Findings checked again when drafts are listed: a finding records what the system under
//! test did with a draft when it was made (a crisis message the pattern missed, an entity
//! retrieval did not select); an edit to the knowledge base or the rules since may have fixed
//! it. [`recheck_findings`] runs each listed finding's message through the current pattern
//! matcher or retrieval pipeline, as `assay generate` did, and says whether the finding still
//! holds or is **fixed since**. A check that cannot be made (no embedder key, a project that
//! does not load) leaves the finding `unchecked` with the reason, and never fails the list.

use assay_core::UserState;
use assay_core::bank::{BankType, PatternCase, SemanticCase};
use assay_core::draft::FindingKind;
use serde::Serialize;

use super::DraftEntry;
use crate::HarnessError;
use assay_project::engine::{self, ProviderCalls};
use assay_project::project::Project;

/// Whether a finding still shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingStatus {
    /// The current system still does what the finding says.
    Holds,
    /// The current system now does what the draft intends: the finding is fixed since it was
    /// recorded.
    FixedSince,
    /// It could not be checked (see the note).
    Unchecked,
}

impl FindingStatus {
    /// The name used in output.
    pub fn as_str(self) -> &'static str {
        match self {
            FindingStatus::Holds => "holds",
            FindingStatus::FixedSince => "fixed_since",
            FindingStatus::Unchecked => "unchecked",
        }
    }
}

/// A finding checked against the current knowledge base and rules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FindingNow {
    /// Whether it still shows.
    pub status: FindingStatus,
    /// What the system selects or matches for the message now (entity ids, in order).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub observed: Vec<String>,
    /// Why it could not be checked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl FindingNow {
    fn unchecked(note: impl Into<String>) -> FindingNow {
        FindingNow {
            status: FindingStatus::Unchecked,
            observed: Vec::new(),
            note: Some(note.into()),
        }
    }

    fn holds_if(holds: bool, observed: Vec<String>) -> FindingNow {
        FindingNow {
            status: if holds {
                FindingStatus::Holds
            } else {
                FindingStatus::FixedSince
            },
            observed,
            note: None,
        }
    }
}

/// Whether a pattern finding still shows, given what the matcher matches now.
fn pattern_holds(kind: FindingKind, case: &PatternCase, matched: &[&str]) -> bool {
    match kind {
        // Meant to fire: still a finding while an expected entity is not matched.
        FindingKind::PatternMiss => case
            .expected_matches
            .iter()
            .any(|e| !matched.contains(&e.as_str())),
        // A look-alike: still a finding while the rules fire on it.
        FindingKind::PatternFalseAlarm => case
            .not_expected_matches
            .iter()
            .any(|e| matched.contains(&e.as_str())),
        FindingKind::RetrievalGap | FindingKind::Overlap | FindingKind::Attack => false,
    }
}

/// Whether a semantic finding still shows: an entity the draft was written for is not
/// selected.
fn semantic_holds(case: &SemanticCase, selected: &[String]) -> bool {
    case.expected_primary.iter().any(|e| !selected.contains(e))
}

/// Checks again every entry of `entries` that has a finding (see the module docs) and sets
/// its `finding_now`. The project at `root` is read as a run reads it; `env` finds the store
/// and the embedder's key.
pub async fn recheck_findings(
    root: &std::path::Path,
    entries: &mut [&mut DraftEntry],
    env: &dyn Fn(&str) -> Option<String>,
) {
    if !entries.iter().any(|e| e.finding.is_some()) {
        return;
    }
    let project = match Project::load(root) {
        Ok(p) => p,
        Err(e) => {
            mark_all(entries, &format!("the project does not load: {e}"));
            return;
        }
    };
    // Pattern findings: the matcher, no model.
    for e in entries.iter_mut() {
        let Some(kind) = e.finding.as_ref().map(|f| f.kind) else {
            continue;
        };
        if e.bank == BankType::Answer.key() {
            e.finding_now = Some(FindingNow::unchecked(
                "an attack is checked again by calling the product: `assay run --include-drafts`",
            ));
            continue;
        }
        if e.bank != BankType::Pattern.key() {
            continue;
        }
        let Ok(case) = serde_json::from_value::<PatternCase>(e.case.clone()) else {
            e.finding_now = Some(FindingNow::unchecked("the draft is not a pattern case"));
            continue;
        };
        e.finding_now = Some(match &project.patterns {
            Some(matcher) => {
                let matched = matcher.matched_entities(&case.prompt);
                let observed = matched.iter().map(|s| (*s).to_owned()).collect();
                FindingNow::holds_if(pattern_holds(kind, &case, &matched), observed)
            }
            None => FindingNow::unchecked("the project has no pattern rules"),
        });
    }
    // Semantic findings: the retrieval pipeline, as a run builds it.
    let semantic: Vec<usize> = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e.finding.is_some() && e.bank == BankType::Semantic.key())
        .map(|(i, _)| i)
        .collect();
    if semantic.is_empty() {
        return;
    }
    let cases: Vec<Option<SemanticCase>> = semantic
        .iter()
        .map(|i| serde_json::from_value(entries[*i].case.clone()).ok())
        .collect();
    match retrieve_all(&project, &cases, env).await {
        Ok(selected) => {
            for ((i, case), got) in semantic.iter().zip(&cases).zip(selected) {
                entries[*i].finding_now = Some(match (case, got) {
                    (Some(case), Ok(ids)) => FindingNow::holds_if(semantic_holds(case, &ids), ids),
                    (None, _) => FindingNow::unchecked("the draft is not a semantic case"),
                    (_, Err(why)) => FindingNow::unchecked(why),
                });
            }
        }
        Err(e) => {
            let note = format!("the retrieval pipeline could not be built: {e}");
            for i in semantic {
                entries[i].finding_now = Some(FindingNow::unchecked(note.clone()));
            }
        }
    }
}

fn mark_all(entries: &mut [&mut DraftEntry], note: &str) {
    for e in entries.iter_mut().filter(|e| e.finding.is_some()) {
        e.finding_now = Some(FindingNow::unchecked(note));
    }
}

/// What the pipeline selects for each case's message now (entity ids, in order), or why it
/// could not tell.
async fn retrieve_all(
    project: &Project,
    cases: &[Option<SemanticCase>],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<Result<Vec<String>, String>>, HarnessError> {
    let settings = &project.settings;
    let store = engine::open_store_with(settings, env)?;
    engine::sync_kb(&store, project)?;
    let kb = engine::snapshot(&*store)?;
    let choice = engine::choose_embedder(settings, None, env)?;
    let calls = ProviderCalls::open(settings, None, env, !choice.is_in_process())?;
    let embedder = calls.embedder(engine::build_embedder(&choice)?);
    let config = engine::retrieval_config(settings, &choice);
    let (pipeline, _, _) =
        engine::prepare_search_pipeline(&store, &kb, project, embedder.as_ref(), config).await?;
    let texts: Vec<String> = cases.iter().flatten().map(|c| c.prompt.clone()).collect();
    let vectors = engine::embed_queries(embedder.as_ref(), &texts).await;
    let mut out = Vec::with_capacity(cases.len());
    for case in cases {
        let Some(case) = case else {
            out.push(Err("the draft is not a semantic case".to_owned()));
            continue;
        };
        let vector = match vectors.get(&case.prompt) {
            Some(Ok(v)) => v,
            Some(Err(e)) => {
                out.push(Err(format!("the message could not be embedded: {e}")));
                continue;
            }
            None => {
                out.push(Err("the message was not embedded".to_owned()));
                continue;
            }
        };
        let state: UserState = case.user_state.clone();
        let audience = assay_project::retrieve::audience(None, &state);
        out.push(
            pipeline
                .retrieve(&case.prompt, Some(vector.as_slice()), &state, &audience)
                .map(|r| r.entities.iter().map(|e| e.entity_id.clone()).collect())
                .map_err(|e| format!("searching the knowledge base: {e}")),
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_finding_holds_until_the_matcher_does_what_the_draft_intends() {
        let case: PatternCase = serde_json::from_value(serde_json::json!({
            "test_id": "P1", "prompt": "p", "expected_matches": ["crisis"],
        }))
        .unwrap();
        assert!(pattern_holds(FindingKind::PatternMiss, &case, &[]));
        assert!(!pattern_holds(FindingKind::PatternMiss, &case, &["crisis"]));
        let look: PatternCase = serde_json::from_value(serde_json::json!({
            "test_id": "P2", "prompt": "p", "expected_matches": [],
            "not_expected_matches": ["crisis"],
        }))
        .unwrap();
        assert!(pattern_holds(
            FindingKind::PatternFalseAlarm,
            &look,
            &["crisis", "x"]
        ));
        assert!(!pattern_holds(
            FindingKind::PatternFalseAlarm,
            &look,
            &["x"]
        ));
    }

    #[test]
    fn a_semantic_finding_holds_while_an_intended_entity_is_not_selected() {
        let case: SemanticCase = serde_json::from_value(serde_json::json!({
            "test_id": "S1", "prompt": "p", "expected_primary": ["a", "b"],
        }))
        .unwrap();
        assert!(semantic_holds(&case, &["a".to_owned()]));
        assert!(!semantic_holds(&case, &["b".to_owned(), "a".to_owned()]));
    }
}
