//! Findings as draft cases, through the review flow of `assay generate`: each crisis evasion
//! becomes a pending pattern-bank draft (critical: it must fire the crisis rules its original
//! fired), with the finding that the rules miss it. `assay generate review --accept` copies it
//! into the bank, where it stays: a matcher that misses it again fails the run.

use std::collections::BTreeMap;
use std::path::PathBuf;

use assay_core::bank::{BankType, PatternCase};
use assay_core::draft::{
    Draft, DraftBank, DraftStatus, Finding, FindingKind, GenerationMethod, Provenance,
};
use assay_project::HarnessError;
use assay_project::drafts::{self, DRAFTS_LOCK_WAIT, DraftsLock};
use assay_project::project::Project;
use assay_retrieval::patterns::PatternMatcher;

use crate::family::Family;
use crate::report::Report;

/// Writes the crisis evasions of `report` as a draft file of the pattern bank: its path and
/// how many drafts it holds; `None` when there is no evasion to write.
pub fn write_drafts(
    project: &Project,
    matcher: &PatternMatcher,
    report: &Report,
) -> Result<Option<(PathBuf, usize)>, HarnessError> {
    let now = chrono::Utc::now();
    let stamp = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let run = report.header.run_id.trim_start_matches("redteam-");
    let mut list = Vec::new();
    for a in report
        .findings
        .iter()
        .filter(|a| a.family == Family::CrisisEvasion)
    {
        let Some(original) = &a.original else {
            continue;
        };
        let mut expected: Vec<String> = Vec::new();
        for m in matcher.match_message(original).crisis_matches {
            for e in m.entities {
                if !expected.contains(&e) {
                    expected.push(e);
                }
            }
        }
        if expected.is_empty() {
            continue;
        }
        let observed = matcher.match_message(&a.input).entities;
        list.push(Draft {
            case: PatternCase {
                test_id: format!("RT-{run}-{}", a.id.to_uppercase()),
                name: format!("Red team: {} rewrite of {}", a.technique, a.source),
                prompt: a.input.clone(),
                expected_matches: expected.clone(),
                expected_secondary: Vec::new(),
                not_expected_matches: Vec::new(),
                pattern_type: "crisis".into(),
                is_critical: true,
                known_missing: Vec::new(),
                provenance: Some(Provenance {
                    method: GenerationMethod::Redteam,
                    entity_id: expected.first().cloned(),
                    entity_versions: BTreeMap::new(),
                    model: None,
                    prompt_hash: None,
                    language: Some("en".into()),
                    variant: Some(format!(
                        "{} of {} (run {}, seed {})",
                        a.technique, a.source, report.header.run_id, report.header.seed
                    )),
                    generation: None,
                    generated_at: stamp.clone(),
                    accepted_by: None,
                    accepted_at: None,
                    confirmed_by: None,
                    confirmed_at: None,
                }),
            },
            status: DraftStatus::Pending,
            finding: Some(Finding {
                kind: FindingKind::PatternMiss,
                intended: format!(
                    "a crisis message ({} rewritten by {}): must bring in {}",
                    a.source,
                    a.technique,
                    expected.join(", ")
                ),
                observed,
                explanation: format!(
                    "red-team finding {}: the crisis rules do not fire on this rewrite of a message they catch",
                    a.id
                ),
            }),
            reviewed_by: None,
            reviewed_at: None,
            note: None,
            accepted_into: None,
        });
    }
    if list.is_empty() {
        return Ok(None);
    }
    let _lock = DraftsLock::acquire(&project.settings.root, DRAFTS_LOCK_WAIT)?;
    let dir = drafts::drafts_dir(&project.settings.banks_dir, BankType::Pattern);
    let base = drafts::new_generation_id(now);
    let mut generation = base.clone();
    let mut n = 2;
    while dir.join(format!("{generation}.json")).exists() {
        generation = format!("{base}-{n}");
        n += 1;
    }
    for d in &mut list {
        if let Some(p) = d.case.provenance.as_mut() {
            p.generation = Some(generation.clone());
        }
    }
    let count = list.len();
    let file = DraftBank {
        schema: None,
        bank_type: BankType::Pattern,
        generation: generation.clone(),
        created: stamp,
        request: BTreeMap::from([
            ("command".to_owned(), "assay redteam --drafts".to_owned()),
            ("run".to_owned(), report.header.run_id.clone()),
            ("family".to_owned(), Family::CrisisEvasion.name().to_owned()),
        ]),
        drafts: list,
    };
    let path = dir.join(format!("{generation}.json"));
    drafts::write_draft_bank(&path, &file)?;
    Ok(Some((path, count)))
}
